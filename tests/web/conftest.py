import pytest

from tests.conftest import use_fast_password_hashing


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    use_fast_password_hashing(settings)
