"""The REST API of SPEC §12: tokens, ingest (201/200/202/400/401/403/404/413), reading."""

from __future__ import annotations

import gzip
import io
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from ctxsim.api.models import ApiToken, ReceivedFile
from ctxsim.api.tokens import hash_token
from ctxsim.generator import write_claude_code_jsonl
from ctxsim.reviews.models import Comment
from ctxsim.transcripts.models import Content, ImportJob, Message, Session
from tests.factories import bearer, body_of
from tests.shared import SHARED_DIR, requires_shared

pytestmark = pytest.mark.django_db

URL = "/api/v1/transcripts"
EXPECTED = SHARED_DIR / "transcripts" / "expected-counts.json"


def shared_cases() -> list[str]:
    if not EXPECTED.is_file():
        return []
    return sorted(json.loads(EXPECTED.read_text()))


def generated(seed: int = 11, calls: int = 5) -> bytes:
    out = StringIO()
    write_claude_code_jsonl(out, calls, seed)
    return out.getvalue().encode()


def post(body: bytes, token: str | None, query: str = "", **extra):
    return Client().post(f"{URL}{query}", data=body, content_type="application/octet-stream",
                         **bearer(token), **extra)


def nothing_stored() -> bool:
    return not (Session.objects.exists() or Message.objects.exists() or Content.objects.exists())


def made_token(team: str = "alpha", scope: str = "ingest") -> str:
    out = StringIO()
    call_command("create_api_token", "--team", team, "--name", "ci", "--scope", scope,
                 stdout=out, stderr=StringIO())
    return out.getvalue().strip()


# -- tokens ------------------------------------------------------------------------------------


def test_create_api_token_prints_a_token_stored_only_as_its_hash(personas):
    raw = made_token(scope="ingest,read")
    row = ApiToken.objects.get()
    assert raw.startswith("ctx_") and len(raw) > 40
    assert row.token_hash == hash_token(raw) and raw not in (row.prefix, row.token_hash)
    assert row.scope_list == ["ingest", "read"] and row.team == personas.team


def test_create_api_token_refuses_an_unknown_team_or_scope(personas):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no team"):
        call_command("create_api_token", "--team", "nope", "--name", "x")
    with pytest.raises(CommandError, match="unknown scope write"):
        call_command("create_api_token", "--team", "alpha", "--name", "x", "--scope", "write")


def test_owners_create_a_token_shown_once_and_revoke_it(personas):
    owner = personas.client("owner")
    page = owner.post(reverse("team-token-create", args=["alpha"]),
                      {"name": "laptop hook", "scopes": ["ingest", "read"]})
    assert page.status_code == 200
    token = ApiToken.objects.get()
    raw = page.context["raw"]
    assert raw in page.content.decode() and token.token_hash == hash_token(raw)
    assert "no-cache" in page["Cache-Control"]
    members = owner.get(reverse("team-members", args=["alpha"])).content.decode()
    assert "laptop hook" in members and raw not in members and "never" in members
    assert post(generated(), raw).status_code == 201
    members = owner.get(reverse("team-members", args=["alpha"])).content.decode()
    assert "never" not in members.split('id="api-tokens"')[1].split("</table>")[0]
    owner.post(reverse("team-token-revoke", args=["alpha", token.pk]))
    assert post(generated(seed=12), raw).status_code == 401


def test_reviewers_cannot_create_tokens(personas):
    response = personas.client("reviewer").post(
        reverse("team-token-create", args=["alpha"]), {"name": "x", "scopes": ["ingest"]})
    assert response.status_code == 403 and not ApiToken.objects.exists()


# -- ingest ------------------------------------------------------------------------------------


@requires_shared
@pytest.mark.parametrize("relative", shared_cases())
def test_each_shared_transcript_posts_as_import_transcript_imports_it(personas, relative):
    """Acceptance 1: 201 with the same counts as the command, then 200 and no new session."""
    token = made_token()
    path = SHARED_DIR / "transcripts" / relative
    out = StringIO()
    call_command("import_transcript", str(path), "--team", "beta", stdout=out)
    expected = [json.loads(line) for line in out.getvalue().splitlines()]
    response = post(path.read_bytes(), token, f"?name={path.name}")
    assert response.status_code == 201, response.content
    got = response.json()["sessions"]
    keys = ("title", "format", "messages", "tool_calls", "tool_results")
    assert [{k: s[k] for k in keys} for s in got] == [{k: e[k] for k in keys} for e in expected]
    assert all(Session.objects.get(pk=s["id"]).team == personas.team for s in got)
    count = Session.objects.count()
    again = post(path.read_bytes(), token, f"?name={path.name}")
    assert again.status_code == 200
    assert [s["id"] for s in again.json()["sessions"]] == [s["id"] for s in got]
    assert Session.objects.count() == count


def test_a_multipart_file_and_a_gzip_body_are_accepted(personas, api_tokens):
    body = generated()
    upload = io.BytesIO(body)
    upload.name = "session.jsonl"
    response = Client().post(URL, {"file": upload}, **bearer(api_tokens.ingest))
    assert response.status_code == 201
    assert Session.objects.get(pk=response.json()["sessions"][0]["id"]).source_name == (
        "session.jsonl")
    zipped = post(gzip.compress(generated(seed=3)), api_tokens.ingest,
                  HTTP_CONTENT_ENCODING="gzip")
    assert zipped.status_code == 201
    assert zipped.json()["sessions"][0]["tool_calls"] > 0


def test_bad_tokens_are_401_and_a_token_without_the_scope_403(personas, api_tokens):
    for token in (None, "ctx_wrong", api_tokens.revoked):
        response = post(generated(), token)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
    response = post(generated(), api_tokens.read)
    assert response.status_code == 403 and "ingest" in response.json()["detail"]
    assert nothing_stored()


def test_a_malformed_file_is_400_with_the_upload_pages_line_and_nothing_stored(
    personas, api_tokens
):
    response = post(b'{"messages": [}', api_tokens.ingest)
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert "\n" not in detail and "line 1" in detail
    upload = io.BytesIO(b'{"messages": [}')
    upload.name = "bad.json"
    page = personas.client("owner").post(reverse("upload"), {"files": [upload]}, follow=True)
    assert detail in page.content.decode().replace("&quot;", '"').replace("&#x27;", "'")
    assert post(b"", api_tokens.ingest).json()["detail"] == "the file is empty"
    assert post(b"not gzip", api_tokens.ingest, HTTP_CONTENT_ENCODING="gzip").status_code == 400
    assert post(generated(), api_tokens.ingest, "?format=nope").status_code == 400
    assert post(generated(), api_tokens.ingest, "?session_key=a%00b").status_code == 400
    assert nothing_stored() and not ReceivedFile.objects.exists()


def test_an_over_limit_body_is_413(personas, api_tokens, settings):
    settings.CTXSIM_MAX_UPLOAD_BYTES = 1000
    body = generated()
    assert len(body) > 1000
    assert post(body, api_tokens.ingest).status_code == 413
    # Declared small but expanding past the limit: refused while decompressing.
    assert post(gzip.compress(body), api_tokens.ingest,
                HTTP_CONTENT_ENCODING="gzip").status_code == 413
    upload = io.BytesIO(body)
    upload.name = "big.jsonl"
    assert Client().post(URL, {"file": upload}, **bearer(api_tokens.ingest)).status_code == 413
    assert nothing_stored()


def test_a_large_file_is_queued_with_202_and_its_job_is_followed(
    personas, api_tokens, settings, tmp_path
):
    from ctxsim.transcripts.services import run_import_job

    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 100
    settings.MEDIA_ROOT = tmp_path / "media"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("ctxsim.transcripts.services.enqueue", lambda job: None)
        response = post(generated(), api_tokens.ingest, "?session_key=abc")
    assert response.status_code == 202
    job_url = response.json()["job"]["url"]
    job = ImportJob.objects.get(pk=response.json()["job"]["id"])
    queued = Client().get(job_url, **bearer(api_tokens.ingest)).json()
    assert queued["status"] == "queued" and queued["sessions"] == []
    run_import_job(job.pk)
    done = Client().get(job_url, **bearer(api_tokens.read)).json()
    assert done["status"] == "done" and len(done["sessions"]) == 1
    assert ReceivedFile.objects.get().outcome == ReceivedFile.Outcome.NEW
    assert Client().get(job_url, **bearer(api_tokens.other)).status_code == 404


def test_a_new_file_for_the_same_session_key_replaces_the_unreviewed_one(personas, api_tokens):
    first = post(generated(calls=4), api_tokens.ingest, "?session_key=s-1").json()
    second = post(generated(calls=6), api_tokens.ingest, "?session_key=s-1")
    assert second.status_code == 201 and second.json()["outcome"] == "replaced"
    assert not Session.objects.filter(pk=first["sessions"][0]["id"]).exists()
    assert Session.objects.count() == 1


def test_a_queued_import_that_ends_late_is_replaced_by_the_newer_file(
    personas, api_tokens, settings, tmp_path, monkeypatch
):
    from ctxsim.transcripts.services import run_import_job

    settings.MEDIA_ROOT = tmp_path / "media"
    monkeypatch.setattr("ctxsim.transcripts.services.enqueue", lambda job: None)
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 100
    queued = post(generated(calls=4), api_tokens.ingest, "?session_key=s-3").json()
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 10**9
    newer = post(generated(calls=6), api_tokens.ingest, "?session_key=s-3").json()
    run_import_job(queued["job"]["id"])
    job = Client().get(queued["job"]["url"], **bearer(api_tokens.ingest)).json()
    assert job["status"] == "done"
    assert list(Session.objects.values_list("pk", flat=True)) == [newer["sessions"][0]["id"]]


def test_a_new_file_for_a_commented_session_is_stored_beside_it(personas, api_tokens):
    first = post(generated(calls=4), api_tokens.ingest, "?session_key=s-2").json()
    old = Session.objects.get(pk=first["sessions"][0]["id"])
    Comment.objects.create(session=old, author=personas.users["owner"], body="look here")
    second = post(generated(calls=6), api_tokens.ingest, "?session_key=s-2").json()
    assert second["outcome"] == "linked" and Session.objects.count() == 2
    newest = ReceivedFile.objects.order_by("-pk").first()
    assert newest.previous.sessions.get() == old
    viewer = personas.client("viewer")
    old_page = viewer.get(reverse("session-detail", args=[old.pk])).content.decode()
    new_id = second["sessions"][0]["id"]
    assert "A newer upload of this agent session exists" in old_page
    assert f'href="/sessions/{new_id}/"' in old_page
    new_page = viewer.get(reverse("session-detail", args=[new_id])).content.decode()
    assert f'Newer upload of <a href="/sessions/{old.pk}/"' in new_page


# -- reading -----------------------------------------------------------------------------------


def test_sessions_are_listed_and_read_within_the_tokens_team(personas, api_tokens):
    created = post(generated(), api_tokens.ingest, "?name=mine.jsonl").json()["sessions"][0]
    post(generated(seed=4), api_tokens.other)
    listing = Client().get("/api/v1/sessions", **bearer(api_tokens.read)).json()
    assert listing["count"] == 1 and listing["results"][0]["id"] == created["id"]
    searched = Client().get("/api/v1/sessions?q=zzz-nothing", **bearer(api_tokens.read)).json()
    assert searched["count"] == 0
    detail = Client().get(f"/api/v1/sessions/{created['id']}", **bearer(api_tokens.read))
    assert detail.status_code == 200
    body = detail.json()
    assert body["source_name"] == "mine.jsonl" and body["tokens"]["peak_raw"] > 0
    assert body["tokens"]["total_sent"] >= body["tokens"]["peak_sent"] > 0
    assert Client().get(f"/api/v1/sessions/{created['id']}",
                        **bearer(api_tokens.other)).status_code == 404
    assert Client().get(f"/api/v1/sessions/{created['id']}",
                        **bearer(api_tokens.ingest)).status_code == 403


def test_the_trace_is_streamed_and_matches_the_pages_download(personas, api_tokens):
    created = post(generated(), api_tokens.ingest).json()["sessions"][0]
    url = f"/api/v1/sessions/{created['id']}/trace?profile=chatcli&summary=1"
    response = Client().get(url, **bearer(api_tokens.read))
    assert response.status_code == 200 and response.streaming
    streamed = b"".join(response.streaming_content)
    page = personas.client("viewer").get(
        reverse("session-trace", args=[created["id"]]) + "?profile=chatcli&summary=1")
    assert json.loads(streamed) == json.loads(body_of(page))
    bad = Client().get(f"/api/v1/sessions/{created['id']}/trace?profile=nope",
                       **bearer(api_tokens.read))
    assert bad.status_code == 400 and "profile" in bad.json()["detail"]


def test_the_schema_and_docs_page_are_served_without_a_cdn(personas):
    schema = Client().get("/api/v1/openapi.json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/transcripts", "/api/v1/sessions", "/api/v1/sessions/{session_id}",
            "/api/v1/sessions/{session_id}/trace", "/api/v1/jobs/{job_id}"} <= set(paths)
    docs = Client().get("/api/v1/docs")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html and "cdn" not in html.lower()
