"""Secrets planted in a transcript never reach the database, the media or a page (SPEC §12,
acceptance 3), whichever way the file comes in: the API, the upload page, a background job."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import Client
from django.urls import reverse

from ctxsim.transcripts.models import ImportJob, Session
from ctxsim.transcripts.services import run_import_job
from tests.factories import PLANTED_SECRETS as PLANTED
from tests.factories import bearer, body_of

pytestmark = pytest.mark.django_db

# Written with JSON's escaped slashes: both the raw-file pass and the parsed text see it.
ESCAPED_URL = "mysql:\\/\\/root:PlantedEscapedPw@db\\/app"
# The first characters too: a title cut short ("Zp1antedSecre…") must not keep them either.
CORES = [core[:12] for _, core in PLANTED.values()] + ["PlantedEscap"]


def planted_transcript() -> bytes:
    """An OpenAI chat transcript with every kind, in messages, tool calls and results."""
    secrets = [secret for secret, _ in PLANTED.values()]
    messages = [{"role": "system", "content": f"Deploy keys: {secrets[0]}"},
                {"role": "user", "content": f"Fix the deploy. {secrets[1]} {secrets[2]}"}]
    for index, secret in enumerate(secrets[3:], start=1):
        call = f"call_{index}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": call, "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"cmd": f"env | grep {secret}"})},
        }]})
        messages.append({"role": "tool", "tool_call_id": call, "content": f"found: {secret}"})
    messages.append({"role": "assistant", "content": "Rotated them all."})
    text = json.dumps({"model": "gpt-4o", "messages": messages})
    # Splice the escaped form in as raw JSON text (json.dumps would not escape the slashes).
    return text.replace("Rotated them all.", f"Rotated them all, also {ESCAPED_URL}").encode()


def leaks_in_database() -> list[str]:
    """Every table of the database, read with plain SQL (search indexes and the task queue's
    tables too, not only the models)."""
    found = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor, include_views=False):
            quoted = connection.ops.quote_name(table)
            try:
                with transaction.atomic():  # a refused read must not abort the test's transaction
                    cursor.execute(f"SELECT * FROM {quoted}")  # noqa: S608 (names from the DB)
                    rows = cursor.fetchall()
            except DatabaseError:
                continue  # an FTS shadow table some backends refuse to read directly
            for row in rows:
                text = " ".join(
                    bytes(v).decode("utf-8", "replace") if isinstance(v, (bytes, memoryview))
                    else str(v) for v in row
                )
                found += [f"{table}: {core}" for core in CORES
                          if core in text or core.replace("/", "\\/") in text]
    return found


def leaks_in_media(root: Path) -> list[str]:
    if not root.exists():
        return []
    return [f"{path}: {core}" for path in root.rglob("*") if path.is_file()
            for core in CORES if core.encode() in path.read_bytes()]


def leaks_in_pages(personas, api_tokens) -> list[str]:
    client = personas.client("owner")
    bodies = {"home": client.get(reverse("home")).content,
              "search": client.get(reverse("search"), {"q": "deploy"}).content}
    for session in Session.objects.all():
        pk = session.pk
        bodies[f"session {pk}"] = client.get(reverse("session-detail", args=[pk])).content
        # The full trace (the download defaults to the summary) holds every history sent.
        bodies[f"trace {pk}"] = body_of(
            client.get(reverse("session-trace", args=[pk]), {"summary": "0"}))
        bodies[f"activity {pk}"] = client.get(reverse("session-activity", args=[pk])).content
        for name in ("session-compare", "session-insights", "profile-export"):
            bodies[f"{name} {pk}"] = client.get(reverse(name, args=[pk])).content
        for call in range(1, session.model_call_count + 1):
            for row in range(session.message_count + 1):
                response = client.get(reverse("session-message", args=[pk]),
                                      {"call": call, "row": row})
                if response.status_code == 200:
                    bodies[f"message {pk}/{call}/{row}"] = response.content
        api = Client()
        for path in (f"/api/v1/sessions/{pk}", f"/api/v1/sessions/{pk}/trace"):
            response = api.get(path, **bearer(api_tokens.read))
            bodies[path] = body_of(response)
    bodies["api list"] = Client().get("/api/v1/sessions", **bearer(api_tokens.read)).content
    for job in ImportJob.objects.all():
        bodies[f"job {job.pk}"] = client.get(reverse("import-job", args=[job.pk])).content
    return [f"{where}: {core}" for where, body in bodies.items() for core in CORES
            if core.encode() in body]


@pytest.fixture(autouse=True)
def media(settings, tmp_path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def expected_counts() -> dict[str, int]:
    """The first three secrets appear once, the others in a call and in its result; the URL
    password once more, escaped."""
    counts = {kind: 1 if index < 3 else 2 for index, kind in enumerate(PLANTED)}
    counts["password-in-url"] += 1
    return counts


def test_the_fixture_really_holds_every_secret():
    raw = planted_transcript()
    assert all(core.encode() in raw for core in CORES)


def test_secrets_posted_to_the_api_are_never_stored_or_shown(personas, api_tokens, media):
    response = Client().post("/api/v1/transcripts?name=deploy.json", data=planted_transcript(),
                             content_type="application/octet-stream",
                             **bearer(api_tokens.ingest))
    assert response.status_code == 201, response.content
    assert response.json()["redactions"] == expected_counts()
    assert leaks_in_database() == []
    assert leaks_in_media(media) == []
    assert leaks_in_pages(personas, api_tokens) == []
    session = Session.objects.get()
    assert session.meta["redactions"] == expected_counts()
    page = personas.client("viewer").get(reverse("session-detail", args=[session.pk]))
    html = page.content.decode()
    assert "Secrets redacted on import" in html and "github-token × 2" in html
    assert "password-in-url × 3" in html


def test_secrets_uploaded_on_the_page_are_never_stored_or_shown(personas, api_tokens, media):
    upload = io.BytesIO(planted_transcript())
    upload.name = "deploy.json"
    page = personas.client("owner").post(reverse("upload"), {"files": [upload]}, follow=True)
    assert page.status_code == 200
    assert "Secrets redacted" in page.content.decode()
    assert all(core.encode() not in page.content for core in CORES)
    assert Session.objects.get().meta["redactions"] == expected_counts()
    assert leaks_in_database() == [] and leaks_in_media(media) == []
    assert leaks_in_pages(personas, api_tokens) == []


def test_a_background_upload_is_redacted_before_it_is_stored(
    personas, api_tokens, media, settings, monkeypatch
):
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 100
    monkeypatch.setattr("ctxsim.transcripts.services.enqueue", lambda job: None)
    upload = io.BytesIO(planted_transcript())
    upload.name = "deploy.json"
    personas.client("owner").post(reverse("upload"), {"files": [upload]})
    job = ImportJob.objects.get()
    # Queued: the stored upload is on disk, already without the secrets.
    assert job.stored_name and (media / job.stored_name).is_file()
    assert leaks_in_media(media) == []
    assert job.redactions == expected_counts()
    run_import_job(job.pk)
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE, job.message
    assert Session.objects.get().meta["redactions"] == expected_counts()
    assert leaks_in_database() == [] and leaks_in_media(media) == []
    assert leaks_in_pages(personas, api_tokens) == []


def test_a_team_that_turns_redaction_off_keeps_the_text(personas, api_tokens):
    owner = personas.client("owner")
    owner.post(reverse("team-redaction", args=["alpha"]), {})
    personas.team.refresh_from_db()
    assert personas.team.redact_secrets is False
    response = Client().post("/api/v1/transcripts", data=planted_transcript(),
                             content_type="application/octet-stream",
                             **bearer(api_tokens.ingest))
    assert response.status_code == 201 and response.json()["redactions"] == {}
    assert leaks_in_database()  # stored as sent, as the owner chose
    owner.post(reverse("team-redaction", args=["alpha"]), {"redact_secrets": "on"})
    personas.team.refresh_from_db()
    assert personas.team.redact_secrets is True


def test_the_kept_copy_of_a_duplicate_upload_holds_no_escaped_secret(personas, media):
    """Issue 28 item 9: the copy kept for "import again" held an `Authorization: Bearer`
    after an escaped newline and a `\\u002d`-escaped Anthropic key, written as JSON escapes
    the raw-byte pass did not see through."""
    messages = [{"role": "user", "content": "call it"},
                {"role": "assistant", "content": "curl\nAuthorization: Bearer "
                 "PlantedBearerToken0123456789 and sk-ant-api03-PlantedAnthropicKey0123456789"}]
    raw = json.dumps({"model": "gpt-4o", "messages": messages}).replace(
        "sk-ant-api03-", "sk\\u002dant\\u002dapi03\\u002d").encode()
    assert b"\\nAuthorization" in raw and b"\\u002dant" in raw
    owner = personas.client("owner")
    for _ in range(2):  # the second one is a duplicate: its copy is kept
        upload = io.BytesIO(raw)
        upload.name = "escaped.json"
        assert owner.post(reverse("upload"), {"files": [upload]}).status_code in (200, 302)
    assert Session.objects.count() == 1
    kept = [path for path in media.rglob("*") if path.is_file()]
    assert kept, "the duplicate's copy is kept for import again"
    for path in kept:
        data = path.read_bytes()
        assert b"PlantedBearerToken" not in data and b"PlantedAnthropicKey" not in data, path
        assert b"[REDACTED:authorization-header]" in data
        assert b"[REDACTED:anthropic-key]" in data
