"""The API's access matrix: every `/api/v1/` route × every kind of caller × every method.

Routes come from the URL conf (namespace `api`, walked like `test_access_matrix.py` does), so a
route added without a rule fails `test_every_api_route_has_a_rule`. Callers authenticate by
token (SPEC §12): a token per scope in team alpha, a token of team beta (the outsider: alpha's
objects are 404 to it), a revoked token, none at all, and a logged-in owner without a token
(the login session is not an API credential: 401). Bodies are empty, so a caller allowed to
upload gets the importer's "the file is empty" 400.
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse

from ctxsim.transcripts.models import ImportJob
from ctxsim.transcripts.store import save_sessions
from tests.factories import bearer, spilling_session, url_patterns

pytestmark = pytest.mark.django_db

CALLERS = ("ingest", "read", "both", "outsider", "revoked", "no-token", "logged-in")
METHODS = ("GET", "POST", "PUT", "DELETE")


def callers(ingest, read=None, both=None, outsider=404, revoked=401, no_token=401,
            logged_in=401) -> dict:
    read = ingest if read is None else read
    both = read if both is None else both
    return {"ingest": ingest, "read": read, "both": both, "outsider": outsider,
            "revoked": revoked, "no-token": no_token, "logged-in": logged_in}


NOT_ALLOWED = callers(405, outsider=405, revoked=405, no_token=405, logged_in=405)
PUBLIC = callers(200, outsider=200, revoked=200, no_token=200, logged_in=200)
READ_SCOPE = callers(403, 200, 200)
NOWHERE = callers(404, outsider=404, revoked=404, no_token=404, logged_in=404)


def only(method: str, rule: dict) -> dict:
    return {m: rule if m == method else NOT_ALLOWED for m in METHODS}


RULES: dict[str, dict[str, dict]] = {
    # ninja's bare prefix: no view there
    "api-root": dict.fromkeys(METHODS, NOWHERE),
    # the schema and its docs page are public (they hold no data), read-only
    "openapi-json": only("GET", PUBLIC),
    "openapi-view": only("GET", PUBLIC),
    # upload: the ingest scope, into the token's own team (an empty body is a 400)
    "transcripts": only("POST", callers(400, 403, 400, outsider=400)),
    # the list is the token's own team: the outsider's is beta, hence 200
    "sessions": only("GET", callers(403, 200, 200, outsider=200)),
    "session": only("GET", READ_SCOPE),
    "session-trace": only("GET", READ_SCOPE),
    # a job can be followed with either scope (the uploader has only ingest)
    "job": only("GET", callers(200)),
    # the overview is the token's own team (the outsider's is beta), read scope
    "overview": only("GET", callers(403, 200, 200, outsider=200)),
}


def api_patterns():
    return [p for p in url_patterns() if p[0] == "api"]


def test_every_api_route_has_a_rule():
    names = [name for _ns, name, _route, _params in api_patterns()]
    assert all(names), "name every API route (url_name=...) so the matrix can hold its rule"
    assert sorted(set(names) - set(RULES)) == [], "API routes without an access rule"
    assert sorted(set(RULES) - set(names)) == [], "rules for API routes that no longer exist"
    for name, rule in RULES.items():
        assert set(rule) == set(METHODS), name
        for expected in rule.values():
            assert set(expected) == set(CALLERS), name


@pytest.fixture
def api_world(personas):
    owner = personas.users["owner"]
    session = save_sessions([spilling_session()], team=personas.team, user=owner)[0]
    job = ImportJob.objects.create(team=personas.team, user=owner, file_name="big.jsonl",
                                   size=10, status=ImportJob.Status.FAILED)
    return {"session_id": session.pk, "job_id": job.pk}


def client_for(caller: str, personas, api_tokens) -> tuple[Client, dict]:
    client = Client()
    if caller == "logged-in":
        client.force_login(personas.users["owner"])
        return client, {}
    token = {"ingest": api_tokens.ingest, "read": api_tokens.read, "both": api_tokens.both,
             "outsider": api_tokens.other, "revoked": api_tokens.revoked}.get(caller)
    return client, bearer(token)


@pytest.mark.parametrize("caller", CALLERS)
def test_each_caller_gets_the_expected_status_on_every_api_route(
    caller, personas, api_tokens, api_world
):
    client, headers = client_for(caller, personas, api_tokens)
    wrong = []
    for _ns, name, route, params in api_patterns():
        unknown = [p for p in params if p not in api_world]
        assert not unknown, f"{name} ({route}): no test value for {unknown}; add to api_world()"
        url = reverse(f"api:{name}", kwargs={p: api_world[p] for p in params})
        for method in METHODS:
            expected = RULES[name][method][caller]
            with transaction.atomic():
                try:
                    got = client.generic(method, url, **headers).status_code
                except Exception as exc:  # a crash is a finding too
                    got = f"raised {type(exc).__name__}: {exc}"
                finally:
                    transaction.set_rollback(True)
            if got != expected:
                wrong.append(f"{method} {url} ({name}): expected {expected}, got {got}")
    assert not wrong, f"{caller}:\n" + "\n".join(wrong)


def test_another_teams_ids_look_like_missing_ones(personas, api_tokens, api_world):
    """404 with the same body whether the id belongs to alpha or to no one."""
    client = Client()
    foreign = client.get(f"/api/v1/sessions/{api_world['session_id']}",
                         **bearer(api_tokens.other))
    missing = client.get("/api/v1/sessions/999999", **bearer(api_tokens.other))
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
