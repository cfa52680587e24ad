"""The API fuzzed from its own OpenAPI schema (SPEC §12; issue 27 acceptance 4): whatever
schemathesis generates — odd ids, query strings, bodies, multipart parts — every one of its
checks holds: no 5xx, status codes, content types, headers and bodies as documented, requests
the schema forbids refused (400), requests it allows accepted.

Two refusals the schema cannot express are allowed as the one exception of "accepted": a body
that is not a transcript (a schema cannot say which bytes are one) and a cache lifetime the
chosen model's provider does not offer (it depends on another parameter); both are 400s with
their one-line message.

Bounded: a fixed number of examples per operation, derandomized (the same cases on every
run), no shrinking, so the test costs a few seconds and never flakes. Requests carry a token
with both scopes; some path ids are swapped for a real session's, so the code behind the 404
is reached too.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import positive_data_acceptance

from ctxsim.api.tokens import create_token
from ctxsim.generator import generate_session
from ctxsim.transcripts.models import ImportJob
from ctxsim.transcripts.store import save_sessions
from ctxsim.wsgi import application

pytestmark = pytest.mark.django_db

EXAMPLES = 25


@pytest.fixture
def keep_connection():
    """The WSGI handler closes the database connection after each request; the test's
    connection holds its transaction, so keep it open (as Django's test client does)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def fuzz_world(personas, settings, tmp_path, keep_connection):
    settings.MEDIA_ROOT = tmp_path / "media"
    session = save_sessions([generate_session(6, seed=3)], team=personas.team)[0]
    job = ImportJob.objects.create(team=personas.team, file_name="x.jsonl", size=1,
                                   status=ImportJob.Status.DONE, session_ids=[session.pk])
    _, token = create_token(personas.team, "fuzz", "ingest,read")
    return {"session_id": session.pk, "job_id": job.pk, "token": token}


# Loaded at collection: the schema view touches no database. (schemathesis' `from_fixture`
# does not work with this pytest version.)
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)


def _beyond_the_schema(case, response) -> bool:
    if response.status_code != 400:
        return False
    if case.operation.method.upper() == "POST" and case.operation.path == "/api/v1/transcripts":
        return True
    return case.operation.path == "/api/v1/overview" and response.json()["detail"].startswith(
        "lifetime:")


@schemathesis.check
def accepts_what_the_schema_allows(ctx, response, case):
    """schemathesis' positive_data_acceptance, but for the two refusals above."""
    if _beyond_the_schema(case, response):
        return None
    return positive_data_acceptance(ctx, response, case)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_generated_request_gets_a_server_error(case, fuzz_world):
    for name in ("session_id", "job_id"):
        value = (case.path_parameters or {}).get(name)
        if isinstance(value, int) and value % 3 == 0:
            case.path_parameters[name] = fuzz_world[name]
    case.call_and_validate(headers={"Authorization": f"Bearer {fuzz_world['token']}"},
                           excluded_checks=[positive_data_acceptance],
                           additional_checks=[accepts_what_the_schema_allows])
