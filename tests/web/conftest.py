import pytest

from tests.conftest import use_fast_password_hashing
from tests.web.api_helpers import api_tokens  # noqa: F401  (a fixture for the API tests)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    use_fast_password_hashing(settings)
