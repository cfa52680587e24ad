"""Claude Code's request bodies through the upload page and the API (SPEC §12)."""

from __future__ import annotations

import io

import pytest
from django.test import Client
from django.urls import reverse

from ctxsim.importers.claude_code_requests import archive_bytes
from ctxsim.transcripts.models import Session
from tests.importers.test_claude_code_requests import FOLDER, SESSION_ID, folder_files
from tests.web.api_helpers import bearer

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
    page = personas.client("owner").post(reverse("upload"), {"files": uploads})
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
