"""Claude Code's request bodies through the upload page and the API (SPEC §12)."""

from __future__ import annotations

import io

import pytest
from django.test import Client
from django.urls import reverse

from ctxsim.importers.claude_code_requests import archive_bytes
from ctxsim.transcripts.models import Session
from tests.factories import REQUEST_BODIES as FOLDER
from tests.factories import REQUEST_BODIES_SESSION as SESSION_ID
from tests.factories import bearer
from tests.factories import request_body_files as folder_files

pytestmark = pytest.mark.django_db


def test_the_zip_posted_to_the_api_gives_the_session_and_its_sidechain(personas, api_tokens):
    response = Client().post("/api/v1/transcripts?name=bodies.zip",
                             data=archive_bytes(folder_files()),
                             content_type="application/octet-stream",
                             **bearer(api_tokens.ingest))
    assert response.status_code == 201, response.content
    sessions = response.json()["sessions"]
    assert [s["format"] for s in sessions] == ["claude-code-requests"] * 2
    main = Session.objects.get(pk=sessions[0]["id"])
    assert main.source_key == SESSION_ID and main.sidechains.count() == 1
    assert main.tools[0]["name"] == "Bash"
    assert len(main.meta["recorded_requests"]) == 4
    assert personas.client("viewer").get(reverse("session-detail", args=[main.pk])).status_code \
        == 200


def test_the_folders_files_uploaded_together_import_as_one(personas):
    uploads = []
    for path in sorted(FOLDER.iterdir()):
        upload = io.BytesIO(path.read_bytes())
        upload.name = path.name
        uploads.append(upload)
    page = personas.client("owner").post(reverse("upload"), {"files": uploads}, follow=True)
    assert page.status_code == 200
    (result,) = page.context["results"]
    assert not result.error, result.error
    assert [s.format for s in result.sessions] == ["claude-code-requests"] * 2


def test_a_zip_that_is_not_request_bodies_keeps_the_plain_refusal(personas, api_tokens):
    response = Client().post("/api/v1/transcripts", data=archive_bytes({"a.txt": b"x"}),
                             content_type="application/octet-stream",
                             **bearer(api_tokens.ingest))
    assert response.status_code == 400
    assert "ZIP archive" in response.json()["detail"]
    assert not Session.objects.exists()


def test_the_call_view_shows_the_recorded_request_beside_the_profile(personas, api_tokens):
    response = Client().post("/api/v1/transcripts", data=archive_bytes(folder_files()),
                             content_type="application/octet-stream",
                             **bearer(api_tokens.ingest))
    main = response.json()["sessions"][0]["id"]
    viewer = personas.client("viewer")
    none = viewer.get(reverse("session-detail", args=[main]), {"profile": "none", "call": 1})
    html = none.content.decode()
    assert "Recorded request" in html and "0002-request.request.json" in html
    assert "identical to the recorded request" in html  # profile "none" sends what it got
    # A profile that rewrites history departs from the recording somewhere.
    last = viewer.get(reverse("session-detail", args=[main]), {"profile": "chatcli", "call": 3})
    assert "0005-request.request.json" in last.content.decode()


def test_the_first_difference_is_the_first_message_the_profile_changed():
    from types import SimpleNamespace

    from ctxsim.pipeline.messages import Message
    from ctxsim.replays.recorded import compare

    raw = tuple(Message.of(role, text, origin=i) for i, (role, text) in enumerate(
        [("system", "s"), ("user", "u"), ("assistant", "a"), ("user", "v")]))
    meta = {"recorded_requests": [{"request_file": "r.json", "messages": 3,
                                   "matches_history": True}]}
    same = compare(meta, SimpleNamespace(raw_history=raw, sent=raw), 0)
    assert same["first_difference"] is None and same["sent"] == 4
    rewritten = (*raw[:2], Message.of("assistant", "[cleared]", origin=2), raw[3])
    changed = compare(meta, SimpleNamespace(raw_history=raw, sent=rewritten), 0)
    assert changed["first_difference"] == 2 and changed["difference"].startswith("rewritten")
    dropped = compare(meta, SimpleNamespace(raw_history=raw, sent=(raw[0], raw[3])), 0)
    assert dropped["first_difference"] == 1
    assert compare(meta, SimpleNamespace(raw_history=raw, sent=raw), 1) is None
    assert compare({}, SimpleNamespace(raw_history=raw, sent=raw), 0) is None
