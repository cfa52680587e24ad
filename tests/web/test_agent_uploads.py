"""Issue 29 through the web: the unknown-format answer is one line with the reasons behind a
collapsed "details" (upload page, background job page, API), and the files of one
multi-file transcript (a Cline task folder, an OpenHands V1 conversation, OpenCode's storage,
a codex exec stream with its rollout) uploaded together import as one."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from ctxsim.transcripts.models import ImportJob, Session
from tests.factories import bearer, upload
from tests.importers import agent_fixtures as af
from tests.web.test_upload_background import IMMEDIATE

pytestmark = pytest.mark.django_db

UNKNOWN = json.dumps({"hello": "world", "answer": 42}).encode()


def test_the_upload_page_shows_one_line_and_the_reasons_collapsed(personas):
    page = personas.client("owner").post(reverse("upload"), {"files": [upload("x.json", UNKNOWN)]},
                                         follow=True)
    body = page.content.decode()
    (result,) = page.context["results"]
    assert result.error.startswith("unknown transcript format: a JSON object with")
    assert len(result.error) < 160
    assert '<details class="error-details">' in body
    assert "<li><small>mini-swe-agent: " in body and "<li><small>cline: " in body
    assert not Session.objects.exists()


def test_a_near_format_file_names_the_closest_format_on_the_page(personas):
    data = json.dumps(af.cline_ui()).encode()
    page = personas.client("owner").post(reverse("upload"),
                                         {"files": [upload("ui_messages.json", data)]}, follow=True)
    (result,) = page.context["results"]
    assert result.error.startswith("unknown transcript format: closest is cline, but this is a "
                                   "task's ui_messages.json alone")


def test_the_api_answers_the_line_in_detail_and_the_reasons_in_details(api_tokens):
    response = Client().post("/api/v1/transcripts", data=UNKNOWN,
                             content_type="application/octet-stream", **bearer(api_tokens.ingest))
    assert response.status_code == 400
    body = response.json()
    assert body["detail"].startswith("unknown transcript format: ")
    assert any(d.startswith("opencode: ") for d in body["details"])


@override_settings(CTXSIM_BACKGROUND_IMPORT_BYTES=1000, TASKS=IMMEDIATE)
def test_a_failed_background_job_keeps_the_reasons_behind_its_line(
        personas, api_tokens, django_capture_on_commit_callbacks):
    data = UNKNOWN + b" " * 2000
    with django_capture_on_commit_callbacks(execute=True):
        personas.client("owner").post(reverse("upload"), {"files": [upload("big.json", data)]})
    job = ImportJob.objects.get()
    assert job.status == ImportJob.Status.FAILED
    assert job.message_line.startswith("unknown transcript format") and job.message_details
    page = personas.client("owner").get(reverse("import-job", args=[job.pk])).content.decode()
    assert '<details class="error-details">' in page and "aider: " in page
    answer = Client().get(f"/api/v1/jobs/{job.pk}", **bearer(api_tokens.ingest)).json()
    assert answer["message"] == job.message_line and answer["details"] == job.message_details


def _members(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return [(info.filename.rsplit("/", 1)[-1], archive.read(info)) for info in
                archive.infolist()]


@pytest.mark.parametrize(("archive", "format_name", "calls"), [
    (af.cline_folder, "cline", 3), (af.roo_folder, "roo-code", 2),
    (af.openhands_v1_dir, "openhands-v1", 3), (af.opencode_storage, "opencode", 2),
    (af.codex_exec_with_rollout, "codex-exec", 1),
])
def test_a_folders_files_uploaded_together_import_as_one(personas, archive, format_name, calls):
    files = [upload(name, data) for name, data in _members(archive())]
    page = personas.client("owner").post(reverse("upload"), {"files": files}, follow=True)
    (result,) = page.context["results"]
    assert not result.error, result.error
    assert [s.format for s in result.sessions] == [format_name]
    assert result.sessions[0].tool_call_count == calls


@override_settings(CTXSIM_BACKGROUND_IMPORT_BYTES=1000)
def test_a_large_opencode_database_is_imported_now_never_rewritten_line_by_line(personas, tmp_path):
    data = af.opencode_db(tmp_path / "opencode.db")
    assert len(data) > 1000
    page = personas.client("owner").post(reverse("upload"),
                                         {"files": [upload("opencode.db", data)]}, follow=True)
    (result,) = page.context["results"]
    assert not result.error and result.job is None
    assert [s.format for s in result.sessions] == ["opencode"]
