import pytest

from tests.factories import use_fast_password_hashing


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    use_fast_password_hashing(settings)


@pytest.fixture
def long_session(personas):
    """24 model calls with an oversized tool result every fourth: every stage has work."""
    from ctxsim.generator import generate_session
    from ctxsim.transcripts.store import save_sessions

    session = generate_session(24, seed=5, oversize_every=4)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]
