"""Uploading transcripts through the real form in Chromium: counts, drag and drop, the worker."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from ctxsim.generator import write_claude_code_jsonl
from ctxsim.transcripts.models import ImportJob, Session
from tests.shared import SHARED_DIR, requires_shared

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fast_and_isolated(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def generated_jsonl(calls: int, seed: int, **options) -> str:
    out = io.StringIO()
    write_claude_code_jsonl(out, calls, seed, **options)
    return out.getvalue()


@requires_shared
def test_every_shared_transcript_uploaded_through_the_form_has_the_expected_counts(
    personas, login, live_server
):
    expected = json.loads((SHARED_DIR / "transcripts" / "expected-counts.json").read_text())
    page = login("owner")
    page.goto(f"{live_server.url}/uploads/")
    page.set_input_files(
        "input[type=file]", [str(SHARED_DIR / "transcripts" / name) for name in expected]
    )
    page.click("[data-upload-button]")
    expect(page.locator("#upload-results")).to_be_visible(timeout=120_000)
    for name, counts in expected.items():
        result = page.locator(f'li.file-result[data-file="{Path(name).name}"]')
        expect(result).to_have_count(1)
        error = result.locator(".file-error")
        assert error.count() == 0, f"{name}: {error.first.inner_text()}"
        totals = result.locator(".totals")
        got = {
            "sessions": int(totals.get_attribute("data-sessions")),
            "tool_calls": int(totals.get_attribute("data-tool-calls")),
            "tool_results": int(totals.get_attribute("data-tool-results")),
        }
        assert got == counts, name
        expect(result.locator(".session-links a")).to_have_count(counts["sessions"])
    total_sessions = sum(c["sessions"] for c in expected.values())
    assert Session.objects.filter(team=personas.team).count() == total_sessions


def test_files_dropped_on_the_form_are_imported(personas, login, live_server):
    page = login("reviewer")
    page.goto(f"{live_server.url}/uploads/")
    transfer = page.evaluate_handle(
        """(text) => {
            const dt = new DataTransfer();
            dt.items.add(new File([text], "dropped.jsonl", {type: "application/json"}));
            return dt;
        }""",
        generated_jsonl(4, 7),
    )
    page.dispatch_event("[data-dropzone]", "drop", {"dataTransfer": transfer})
    expect(page.locator("[data-file-list] li")).to_contain_text("dropped.jsonl")
    page.click("[data-upload-button]")
    result = page.locator('li.file-result[data-file="dropped.jsonl"]')
    expect(result).to_have_class("file-result imported")
    result.locator(".session-links a").first.click()
    expect(page).to_have_url(f"{live_server.url}/sessions/{Session.objects.get().pk}/")


def test_a_bad_file_shows_its_one_line_message_in_the_browser(
    personas, login, live_server, tmp_path
):
    bad = tmp_path / "broken.json"
    bad.write_text('{"messages": [}')
    page = login("owner")
    page.goto(f"{live_server.url}/uploads/")
    page.set_input_files("input[type=file]", str(bad))
    page.click("[data-upload-button]")
    expect(page.locator('li.file-result[data-file="broken.json"] .file-error')).to_contain_text(
        "line 1, column"
    )
    assert not Session.objects.exists()


def test_an_unknown_format_shows_one_line_and_the_reasons_behind_details(
    personas, login, live_server, tmp_path
):
    odd = tmp_path / "odd.json"
    odd.write_text('{"hello": "world"}')
    page = login("owner")
    page.goto(f"{live_server.url}/uploads/")
    page.set_input_files("input[type=file]", str(odd))
    page.click("[data-upload-button]")
    result = page.locator('li.file-result[data-file="odd.json"]')
    expect(result.locator(".file-error")).to_contain_text("unknown transcript format")
    reasons = result.locator(".error-details li").first
    expect(reasons).to_be_hidden()  # collapsed until asked for
    result.locator(".error-details summary").click()
    expect(reasons).to_be_visible()


def test_a_large_file_goes_through_the_worker_with_a_progress_bar(
    personas, login, live_server, settings, tmp_path, worker
):
    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 100_000
    large = tmp_path / "large-session.jsonl"
    large.write_text(generated_jsonl(300, 5, oversize_every=9))
    page = login("owner")
    page.goto(f"{live_server.url}/uploads/")
    page.set_input_files("input[type=file]", str(large))
    page.click("[data-upload-button]")
    job = ImportJob.objects.get()
    bar = page.locator(f"#import-job-{job.pk} progress.job-progress")
    expect(bar).to_be_visible()
    expect(page.locator(f"#import-job-{job.pk} .job-status")).to_have_text("Queued")
    # Record every value the polled bar shows, to see it move while the worker runs.
    page.evaluate("""() => {
        window.seenProgress = [];
        new MutationObserver(() => {
            const bar = document.querySelector("progress.job-progress");
            if (bar) window.seenProgress.push(Number(bar.value));
        }).observe(document.body, {subtree: true, childList: true});
    }""")
    worker.start()
    link = page.locator(f"#import-job-{job.pk} .session-links a")
    expect(link).to_be_visible(timeout=120_000)
    expect(bar).to_have_count(0)
    seen = page.evaluate("window.seenProgress")
    assert any(0 < value < 100 for value in seen), seen
    job.refresh_from_db()
    assert job.status == ImportJob.Status.DONE and job.progress == 100
    session = Session.objects.get(pk=job.session_ids[0])
    assert session.model_call_count == 300
    assert link.get_attribute("href") == f"/sessions/{session.pk}/"


def test_reloading_the_results_imports_nothing_and_the_same_bytes_again_say_so(
    personas, login, live_server, tmp_path
):
    path = tmp_path / "session.jsonl"
    path.write_text(generated_jsonl(3, seed=21))
    page = login("owner")
    page.goto(f"{live_server.url}/uploads/")
    page.set_input_files("input[type=file]", [str(path)])
    page.click("[data-upload-button]")
    expect(page.locator("li.file-result.imported")).to_have_count(1)
    assert "/uploads/results/" in page.url
    page.reload()  # a GET of the results page: nothing is posted again
    expect(page.locator("li.file-result.imported")).to_have_count(1)
    assert Session.objects.filter(team=personas.team).count() == 1

    page.set_input_files("input[type=file]", [str(path)])
    page.click("[data-upload-button]")
    duplicate = page.locator("li.file-result.duplicate")
    expect(duplicate).to_contain_text("already imported as")
    assert Session.objects.filter(team=personas.team).count() == 1
    duplicate.get_by_role("button", name="Import again").click()
    expect(page.locator("li.file-result.imported")).to_have_count(1)
    assert Session.objects.filter(team=personas.team).count() == 2
