from dataclasses import dataclass

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


@dataclass
class Tokens:
    """API tokens (SPEC §12): one per scope in team alpha, a revoked one, one of team beta."""

    ingest: str
    read: str
    both: str
    other: str  # team beta, both scopes
    revoked: str


@pytest.fixture
def api_tokens(personas) -> Tokens:
    from ctxsim.api import tokens

    owner = personas.users["owner"]
    made = {
        name: tokens.create_token(personas.team, name, scopes, user=owner)
        for name, scopes in (("ingest", "ingest"), ("read", "read"), ("both", "ingest,read"),
                             ("revoked", "ingest,read"))
    }
    tokens.revoke(made["revoked"][0])
    _, other = tokens.create_token(personas.other_team, "beta", "ingest,read",
                                   user=personas.users["outsider"])
    return Tokens(ingest=made["ingest"][1], read=made["read"][1], both=made["both"][1],
                  other=other, revoked=made["revoked"][1])
