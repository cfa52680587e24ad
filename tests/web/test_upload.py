"""The upload page: several files at once, per-file results, clear errors and no partial rows."""

from __future__ import annotations

import gzip
import html
import io
import json
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from ctxsim import importers
from ctxsim.importers.errors import TranscriptError
from ctxsim.transcripts.models import ImportJob, Session
from tests.factories import claude_code_bytes, row_counts, upload

pytestmark = pytest.mark.django_db


BAD_FIXTURES = Path(__file__).resolve().parent.parent / "importers" / "fixtures" / "bad"


def importer_message(data: bytes) -> str:
    """What the importers themselves say about these bytes (the page must show exactly it)."""
    try:
        result = importers.load(io.BytesIO(data), max_bytes=settings.CTXSIM_MAX_UPLOAD_BYTES)
    except TranscriptError as error:
        return str(error)
    assert not result.sessions, "expected bad input"
    return "the file holds no conversation to import"


def _cut_in_the_middle() -> bytes:
    lines = claude_code_bytes(3).splitlines(keepends=True)
    return b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2] + b"\n" + b"".join(lines[3:])


BAD_INPUTS = {
    "empty.jsonl": b"",
    "nul-bytes.jsonl": b'{"type": "user"}\n{"type"\x00: 1}\n',
    "latin-1.json": '{"messages": [{"role": "user", "content": "caf\xe9"}]}'.encode("latin-1"),
    "malformed.json": b'{"messages": [{"role": "user", "content": "hi"},]}',
    "cut-in-the-middle.jsonl": _cut_in_the_middle(),
    "too-deep.json": b"[" * 300 + b"]" * 300,
    "unknown-shape.json": b'{"hello": "world", "answer": 42}',
    "compressed.jsonl.gz": gzip.compress(claude_code_bytes(2)),
    "utf-16.json": '{"messages": []}'.encode("utf-16"),
}


def _bad_cases() -> list[tuple[str, bytes]]:
    cases = list(BAD_INPUTS.items())
    if BAD_FIXTURES.is_dir():
        cases += [
            (f"fixtures/{p.name}", p.read_bytes())
            for p in sorted(BAD_FIXTURES.iterdir())
            if p.is_file() and not p.name.startswith(".") and p.suffix not in {".md", ".txt"}
        ]
    return cases


def test_a_member_who_may_upload_sees_the_upload_form(personas):
    # Viewers see a read-only note instead (issue 19; test_error_pages covers them).
    response = personas.client("reviewer").get(reverse("upload"))
    assert response.status_code == 200
    body = response.content.decode()
    assert 'type="file"' in body and "multiple" in body
    assert 'enctype="multipart/form-data"' in body
    assert "Detect automatically" in body


def test_a_small_file_is_imported_during_the_request(personas):
    response = personas.client("owner").post(
        reverse("upload"), {"files": [upload("demo.jsonl", claude_code_bytes(6))]}, follow=True
    )
    assert response.status_code == 200
    session = Session.objects.get()
    assert session.team == personas.team
    assert session.uploaded_by == personas.users["owner"]
    assert session.source_name == "demo.jsonl"
    body = response.content.decode()
    assert reverse("session-detail", args=[session.pk]) in body
    assert f'data-tool-calls="{session.tool_call_count}"' in body
    assert f'data-tool-results="{session.tool_result_count}"' in body
    assert not ImportJob.objects.exists()


def test_several_files_are_imported_at_once_each_with_its_result(personas):
    files = [
        upload("one.jsonl", claude_code_bytes(4, seed=1)),
        upload("broken.json", b"{nope"),
        upload("two.jsonl", claude_code_bytes(5, seed=2)),
    ]
    response = personas.client("reviewer").post(reverse("upload"), {"files": files},
                                                 follow=True)
    body = response.content.decode()
    assert Session.objects.count() == 2
    assert body.count('class="file-result imported"') == 2
    assert body.count('class="file-result failed"') == 1
    assert html.escape(importer_message(b"{nope")) in body


def test_the_format_can_be_forced(personas):
    data = claude_code_bytes(3)
    client = personas.client("owner")
    wrong = client.post(reverse("upload"), {"files": [upload("a.jsonl", data)], "format": "codex"},
                        follow=True)
    assert 'class="file-result failed"' in wrong.content.decode()
    assert not Session.objects.exists()
    right = client.post(
        reverse("upload"), {"files": [upload("a.jsonl", data)], "format": "claude-code"},
        follow=True,
    )
    assert 'class="file-result imported"' in right.content.decode()
    assert Session.objects.get().format == "claude-code"


def test_an_unknown_forced_format_is_a_form_error(personas):
    response = personas.client("owner").post(
        reverse("upload"), {"files": [upload("a.jsonl", claude_code_bytes(2))], "format": "nope"}
    )
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Session.objects.exists()


@pytest.mark.parametrize(("name", "data"), [pytest.param(*c, id=c[0]) for c in _bad_cases()])
def test_each_bad_input_shows_its_message_and_stores_nothing(personas, name, data):
    expected = importer_message(data)
    before = row_counts()
    response = personas.client("owner").post(reverse("upload"), {"files": [upload(name, data)]},
                                             follow=True)
    assert response.status_code == 200
    body = response.content.decode()
    assert html.escape(expected) in body
    assert 'class="file-result failed"' in body
    assert "\n" not in expected
    assert row_counts() == before


@override_settings(CTXSIM_MAX_UPLOAD_BYTES=1000)
def test_a_file_over_the_size_limit_is_refused_before_it_is_read(personas, monkeypatch):
    def must_not_parse(*args, **kwargs):
        raise AssertionError("an oversized file must not reach the importer")

    monkeypatch.setattr(importers, "load", must_not_parse)
    before = row_counts()
    response = personas.client("owner").post(
        reverse("upload"), {"files": [upload("big.jsonl", b"x" * 5000)]}, follow=True
    )
    assert "the file is 0.0 MB, over the 0.0 MB limit" in response.content.decode()
    assert row_counts() == before


def test_a_viewer_may_not_upload(personas):
    before = row_counts()
    response = personas.client("viewer").post(
        reverse("upload"), {"files": [upload("a.jsonl", claude_code_bytes(2))]}
    )
    assert response.status_code == 403
    assert row_counts() == before


def test_an_outsider_uploads_into_their_own_team_only(personas):
    personas.client("outsider").post(
        reverse("upload"), {"files": [upload("a.jsonl", claude_code_bytes(2))]}
    )
    assert Session.objects.get().team == personas.other_team
    assert "a.jsonl" not in personas.client("owner").get(reverse("home")).content.decode()


def test_anonymous_users_cannot_upload(personas):
    response = personas.client("anonymous").post(
        reverse("upload"), {"files": [upload("a.jsonl", claude_code_bytes(2))]}
    )
    assert response.status_code == 302
    assert not Session.objects.exists()


def test_a_file_name_is_shown_escaped(personas):
    name = '<img src=x onerror="alert(1)">.jsonl'
    response = personas.client("owner").post(reverse("upload"), {"files": [upload(name, b"")]},
                                             follow=True)
    body = response.content.decode()
    assert "<img src=x" not in body
    assert "&lt;img src=x" in body


def test_a_failure_while_saving_leaves_no_rows(personas, monkeypatch):
    from ctxsim.transcripts import store

    real = store._save_one
    calls = []

    def fail_on_the_second_session(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "_save_one", fail_on_the_second_session)
    data = _two_session_claude_code()
    before = row_counts()
    with pytest.raises(RuntimeError):
        personas.client("owner").post(reverse("upload"), {"files": [upload("two.jsonl", data)]})
    assert row_counts() == before


def _two_session_claude_code() -> bytes:
    """A main session with one sidechain, so one file stores two sessions."""
    main = claude_code_bytes(2, seed=3).decode().splitlines()
    side = claude_code_bytes(2, seed=4).decode().splitlines()
    lines = list(main)
    for raw in side[1:]:
        record = json.loads(raw)
        record["isSidechain"] = True
        record["sessionId"] = json.loads(main[1])["sessionId"]
        if record.get("parentUuid") is None:
            record["parentUuid"] = json.loads(main[-1])["uuid"]
        lines.append(json.dumps(record))
    return ("\n".join(lines) + "\n").encode()


def test_the_two_session_helper_really_yields_two_sessions():
    result = importers.load(io.BytesIO(_two_session_claude_code()))
    assert len(result.sessions) == 2


def test_an_upload_gets_its_list_figures_and_its_activity_line_from_the_apps_above(personas):
    """transcripts announces the import; replays (default replay) and reviews (activity) act."""
    from ctxsim.reviews.models import Activity

    personas.client("owner").post(
        reverse("upload"), {"files": [upload("demo.jsonl", claude_code_bytes(6))]}
    )
    session = Session.objects.get()
    assert session.peak_raw_tokens and session.peak_sent_tokens
    assert session.replay_errors == 0
    assert Activity.objects.filter(session=session, kind="upload").count() == 1


def test_a_failing_default_replay_never_fails_the_upload(personas, monkeypatch):
    from ctxsim.replays import services as replays

    def broken(session):
        raise RuntimeError("replay broke")

    monkeypatch.setattr(replays, "compute_default_stats", broken)
    response = personas.client("owner").post(
        reverse("upload"), {"files": [upload("demo.jsonl", claude_code_bytes(6))]}, follow=True
    )
    assert response.status_code == 200
    assert Session.objects.get().peak_raw_tokens is None
