"""Issue 20 ("Holds under hostile use"): inputs a team member can send never give a 500."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from ctxsim.replays.models import SavedProfile
from ctxsim.transcripts.models import Session as StoredSession
from ctxsim.transcripts.store import save_sessions
from tests.factories import spilling_session

pytestmark = pytest.mark.django_db

HUGE = "9" * 5000  # more digits than Python converts (sys.get_int_max_str_digits: 4300)


def page_url(row, query: str = "") -> str:
    return reverse("session-detail", args=[row.pk]) + (f"?{query}" if query else "")


@pytest.fixture
def stored(personas):
    return save_sessions([spilling_session()], team=personas.team,
                         user=personas.users["owner"])[0]


def test_a_threshold_of_thousands_of_digits_is_not_a_500(personas, stored):
    """issue 20 item 14: an env knob of 5,000 digits crashed `go_atoi` on every page."""
    client = personas.client("viewer")
    response = client.get(page_url(stored, f"env.CHATCLI_TOOL_RESULT_MAX_CHARS={HUGE}"),
                          follow=True)
    assert response.status_code == 200


def test_a_saved_profile_with_a_huge_knob_leaves_the_session_readable(personas, stored):
    """issue 20 item 14: a reviewer could save such a profile and break the session."""
    reviewer = personas.client("reviewer")
    reviewer.post(reverse("profile-save", args=[stored.pk]), {
        "profile": "chatcli", "env.CHATCLI_TOOL_RESULT_MAX_CHARS": HUGE, "name": "huge"})
    saved = SavedProfile.objects.filter(team=personas.team, name="huge").first()
    if saved is not None:
        page = personas.client("viewer").get(page_url(stored, f"profile={saved.ref}"),
                                             follow=True)
        assert page.status_code == 200


def test_pasting_a_profile_with_a_huge_integer_says_what_is_wrong(personas, stored):
    """issue 20 item 14: `_load_object` let json's ValueError escape (500)."""
    response = personas.client("reviewer").post(
        reverse("profile-import", args=[stored.pk]),
        {"format": "aivax", "name": "huge", "text": '{"contextMaximumSize": ' + HUGE + "}"})
    assert response.status_code == 400
    assert "more than 4300 digits" in response.content.decode()
    assert not SavedProfile.objects.filter(name="huge").exists()


def test_uploading_a_transcript_with_a_huge_integer_says_which_line(personas):
    """issue 20 item 14: `_parse_line` let json's ValueError escape (500 on upload)."""
    line = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
            "message": {"role": "user", "content": "hello"}}
    data = (json.dumps(line) + "\n" + json.dumps({**line, "uuid": "u2", "parentUuid": "u1"})
            .replace('"sessionId"', f'"costUSD": {HUGE}, "sessionId"') + "\n").encode()
    before = StoredSession.objects.count()
    response = personas.client("reviewer").post(reverse("upload"), {
        "files": [SimpleUploadedFile("big.jsonl", data)]}, follow=True)
    assert response.status_code == 200
    body = response.content.decode()
    assert "line 2" in body and "more than 4300 digits" in body
    assert StoredSession.objects.count() == before


def _simulate(path, *args) -> dict:
    import io

    from ctxsim import cli

    out, err = io.StringIO(), io.StringIO()
    assert cli.main([str(path), *args], out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def _export_trace(session_id: int, *args) -> dict:
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("export_trace", str(session_id), *args, stdout=out)
    return json.loads(out.getvalue())


def _claude_code_line(i: int, parent: str | None, role: str, content) -> dict:
    message = {"role": role, "content": content}
    if role == "assistant":
        message = {**message, "id": f"msg_{i}", "model": "claude-sonnet-4-20250514"}
    return {"type": role, "uuid": f"u{i}", "parentUuid": parent, "sessionId": "s1",
            "isSidechain": False, "message": message}


def test_a_tool_input_holding_a_nul_character_imports_and_keeps_its_arguments(personas,
                                                                             tmp_path):
    """issue 20 item 16: a NUL in a tool input is the six characters `\\u0000` in its
    arguments; `json_safe` replaced them inside serialized JSON and broke the import."""
    from ctxsim.transcripts.imports import import_transcript
    from ctxsim.transcripts.store import load_session

    call = {"type": "tool_use", "id": "toolu_1", "name": "Write",
            "input": {"path": "a.bin", "content": "head\x00tail \\u0000 literal"}}
    lines = [
        _claude_code_line(0, None, "user", "write the file"),
        _claude_code_line(1, "u0", "assistant", [call]),
        _claude_code_line(2, "u1", "user", [{"type": "tool_result", "tool_use_id": "toolu_1",
                                             "content": "done"}]),
        _claude_code_line(3, "u2", "assistant", [{"type": "text", "text": "Written."}]),
    ]
    path = tmp_path / "nul.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    (row,) = import_transcript(path, team=personas.team).sessions
    stored = load_session(row)
    (stored_call,) = [c for m in stored.messages for c in m.tool_calls]
    assert json.loads(stored_call.arguments) == call["input"]
    # export_trace starts from the session's own agent's profile; simulate from chatcli.
    assert _export_trace(row.pk) == _simulate(path, "--profile", "claude-code")


def test_tool_call_ids_and_names_of_any_length_are_stored_whole(personas, tmp_path):
    """issue 20 item 17: ids over 300 characters were cut in storage but not in the calls, so
    the stored replay injected "[Tool result missing…]" and export_trace differed."""
    from ctxsim.transcripts.imports import import_transcript
    from ctxsim.transcripts.store import load_session

    long_id = "call_" + "x" * 400
    long_name = "tool_" + "n" * 300
    request = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": long_id, "type": "function",
             "function": {"name": long_name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": long_id, "name": long_name, "content": "ok"},
        {"role": "assistant", "content": "done"},
    ]}
    path = tmp_path / "long-ids.json"
    path.write_text(json.dumps(request))
    (row,) = import_transcript(path, team=personas.team).sessions
    stored = load_session(row)
    result = next(m for m in stored.messages if m.role == "tool")
    assert result.tool_call_id == long_id
    trace = _export_trace(row.pk)
    assert trace == _simulate(path)
    assert "Tool result missing" not in json.dumps(trace)


def test_json_safe_cleans_values_not_their_serialized_text():
    """issue 20 item 16: real NULs become U+FFFD; an escaped `\\u0000` text stays as it is."""
    from ctxsim.transcripts.store import json_safe

    value = {"a\x00": ["x\x00y", "\\u0000", 3, None], "b": {"c": "\\\\u0000\x00"}}
    assert json_safe(value) == {"a\ufffd": ["x\ufffdy", "\\u0000", 3, None],
                                "b": {"c": "\\\\u0000\ufffd"}}
    clean = {"k": ["\\u0000 is six characters"]}
    assert json_safe(clean) is clean


def test_the_session_page_says_nothing_about_which_server_paths_exist(personas, stored,
                                                                      tmp_path):
    """issue 20 item 19: `spill_dir=<a file>/x` said "dir creation failed" on the page and
    `<a missing path>/x` did not, so any viewer could probe the server's filesystem."""
    planted = tmp_path / "a-file"
    planted.write_text("x")
    client = personas.client("viewer")

    def page(directory: str) -> str:
        response = client.get(page_url(stored, f"spill_dir={directory}&call=1"), follow=True)
        assert response.status_code == 200
        return response.content.decode()

    for directory in (f"{planted}/x", f"{tmp_path}/absent/x"):
        body = page(directory)
        assert "dir creation failed" not in body
        assert "budget_call_1_1.txt" in body  # spilled, as anywhere a directory can be made
    assert "dir creation failed" in page("/dev/null/x")  # impossible everywhere: still said


# --- issue 20 item 15: numbers in a query or form are ASCII digits, or refused --------------

NOT_ASCII_NUMBERS = ["²", "١", "٣٤", "𝟙", "1²", "9" * 30, "9" * 5000]


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_a_call_that_is_not_an_ascii_number_shows_the_default_call(personas, stored, number):
    """issue 20 item 15: `²` passes isdigit() and crashed int() (500 on `?call=²`)."""
    client = personas.client("viewer")
    for url in (page_url(stored, f"call={number}"),
                reverse("session-compare", args=[stored.pk]) + f"?call={number}",
                reverse("session-message", args=[stored.pk]) + f"?call={number}&row=0"):
        assert client.get(url, follow=True).status_code in (200, 404), url


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_a_message_row_that_is_not_an_ascii_number_is_a_404(personas, stored, number):
    """issue 20 item 15: `row=²` crashed the message endpoint."""
    url = reverse("session-message", args=[stored.pk]) + f"?call=1&row={number}"
    assert personas.client("viewer").get(url).status_code == 404


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_spill_line_bounds_that_are_not_ascii_numbers_are_reported(personas, stored, number):
    """issue 20 item 15: spill `start`/`end` of `²` crashed `spill_lines`."""
    from tests.factories import first_spill, spill_args

    client = personas.client("viewer")
    client.get(page_url(stored, "call=1"), follow=True)
    spill = first_spill(stored)
    url = reverse("spill-view", args=spill_args(stored, spill))
    for query in (f"?start={number}", f"?end={number}"):
        response = client.get(url + query)
        assert response.status_code == 200
        assert "must be a line number" in response.content.decode()


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_comment_positions_that_are_not_ascii_numbers_are_refused(personas, stored, number):
    """issue 20 item 15: `reviews/views.py:_index` used isdigit() before int()."""
    from ctxsim.reviews.models import Comment

    client = personas.client("reviewer")
    url = reverse("comment-create", args=[stored.pk])
    for fields in ({"call": number}, {"call": "1", "message": number}, {"parent": number}):
        response = client.post(url, {"body": "hello", **fields})
        assert response.status_code in (200, 400), fields
    assert client.get(url + f"?call={number}").status_code == 400
    assert not Comment.objects.exists()


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_a_saved_profile_reference_that_is_not_an_ascii_number_is_no_profile(personas, stored,
                                                                              number):
    """issue 20 item 15: `profile=saved:²` reached the database lookup."""
    response = personas.client("viewer").get(page_url(stored, f"profile=saved:{number}"),
                                             follow=True)
    assert response.status_code == 200
    assert "no such saved profile" in response.content.decode()


@pytest.mark.parametrize("name", ['team" ; filename="evil.exe', "line\nbreak", "tab\there",
                                  "ünïcødé ²", "a\\b/c"])
def test_the_trace_download_name_is_sanitised(personas, stored, name):
    """issue 20 item 18: the saved profile's name went into Content-Disposition as it was:
    a quote added a second filename, a newline gave a 500."""
    saved = SavedProfile.objects.create(team=personas.team, name=name, base="chatcli",
                                        stages=[], params={}, created_by=personas.users["owner"])
    response = personas.client("viewer").get(
        reverse("session-trace", args=[stored.pk]) + f"?profile=saved:{saved.pk}&summary=1")
    assert response.status_code == 200
    header = response["Content-Disposition"]
    assert header.count('filename="') == 1
    assert re.fullmatch(r'attachment; filename="ctxsim-session-\d+-[A-Za-z0-9._-]+\.json"',
                        header), header


# --- issue 20 item 14: a team profile can be deleted (a broken one no longer sticks) --------

def _saved(personas, name="broken", team=None):
    return SavedProfile.objects.create(team=team or personas.team, name=name, base="chatcli",
                                       stages=[], params={}, created_by=personas.users["owner"])


def test_a_reviewer_deletes_a_team_profile_from_the_session_page(personas, stored):
    """issue 20 item 14: there was no way to delete a saved profile; who may save one (the
    access rule "write": reviewers and owners) may delete it."""
    saved = _saved(personas)
    client = personas.client("reviewer")
    page = client.get(page_url(stored, f"profile={saved.ref}"), follow=True).content.decode()
    url = reverse("profile-delete", args=[stored.pk, saved.pk])
    assert f'action="{url}"' in page
    response = client.post(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("session-detail", args=[stored.pk]))
    assert not SavedProfile.objects.filter(pk=saved.pk).exists()
    again = client.get(page_url(stored, f"profile={saved.ref}"), follow=True)
    assert "no such saved profile" in again.content.decode()


def test_a_viewer_cannot_delete_and_sees_no_delete_button(personas, stored):
    """issue 20 item 14."""
    saved = _saved(personas)
    client = personas.client("viewer")
    url = reverse("profile-delete", args=[stored.pk, saved.pk])
    assert url not in client.get(page_url(stored, f"profile={saved.ref}"),
                                 follow=True).content.decode()
    assert client.post(url).status_code == 403
    assert SavedProfile.objects.filter(pk=saved.pk).exists()


def test_another_teams_profile_cannot_be_deleted_through_a_session(personas, stored):
    """issue 20 item 14: the profile must belong to the session's team."""
    theirs = _saved(personas, "theirs", team=personas.other_team)
    for persona in ("owner", "outsider"):
        url = reverse("profile-delete", args=[stored.pk, theirs.pk])
        assert personas.client(persona).post(url).status_code == 404
    assert SavedProfile.objects.filter(pk=theirs.pk).exists()


# --- issue 20 item 2: the trace download streams, and is the summary unless asked ----------

def _download(client, url) -> tuple[bytes, object]:
    response = client.get(url)
    assert response.status_code == 200
    assert response.streaming
    return b"".join(response.streaming_content), response


def test_the_trace_download_is_the_summary_by_default_and_the_full_trace_on_request(personas,
                                                                                  long_session):
    """issue 20 item 2: the page's default link built the full trace (928 MB for a long
    session); the default is now the summary, `summary=0` the full one, both exactly the
    trace `export_trace` and `simulate` give."""
    from ctxsim.replays.services import trace_json
    from ctxsim.replays.state import settings_from_query

    client = personas.client("viewer")
    url = reverse("session-trace", args=[long_session.pk])
    settings, _ = settings_from_query({}, personas.team)
    summary, _ = _download(client, url)
    assert summary.decode() == trace_json(long_session, settings, summary=True)
    full, response = _download(client, url + "?summary=0")
    assert full.decode() == trace_json(long_session, settings, summary=False)
    assert int(response["Content-Length"]) == len(full)
    assert "history" in json.loads(full)["calls"][1]["pairing"]
    assert "history" not in json.loads(summary)["calls"][1]["pairing"]


def test_the_full_trace_is_never_held_in_memory_whole(personas):
    """issue 20 item 2: 4.9 GB peak for one download. The trace is written call by call to a
    file and streamed from it: the peak is a fraction of the trace's size (which grows with
    the square of the calls, the peak with one call's history)."""
    import tracemalloc

    from ctxsim.generator import generate_session

    row = save_sessions([generate_session(80, seed=3, oversize_every=6)], team=personas.team)[0]
    client = personas.client("viewer")
    url = reverse("session-trace", args=[row.pk]) + "?summary=0"
    client.get(url)  # warm: the session and its token counts are loaded once per process
    tracemalloc.start()
    try:
        response = client.get(url)
        size = sum(len(chunk) for chunk in response.streaming_content)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size > 1_000_000
    assert peak < size / 3, (peak, size)


# --- issue 20 item 4 (part): one user cannot hold every thread with new replays -------------

def test_a_user_already_replaying_gets_a_429_for_another_new_replay(personas, stored):
    """issue 20 items 1 and 4: four viewer GETs with new thresholds occupied every thread; a
    user now runs at most CTXSIM_REPLAYS_PER_USER new replays at a time per process, and a
    request past that is told to retry (replays already stored are still served)."""
    from ctxsim.replays.limits import replay_slot

    viewer = personas.users["viewer"]
    client = personas.client("viewer")
    stored_url = page_url(stored, "call=1")
    assert client.get(stored_url, follow=True).status_code == 200  # replayed and stored
    with replay_slot(viewer):  # as if another request of theirs were replaying now
        busy = client.get(page_url(stored, "env.CHATCLI_TOOL_RESULT_MAX_CHARS=4321&call=1"),
                          follow=True)
        assert busy.status_code == 429
        assert "already running" in busy.content.decode()
        assert busy["Retry-After"]
        assert client.get(stored_url, follow=True).status_code == 200
        other = personas.client("reviewer").get(
            page_url(stored, "env.CHATCLI_TOOL_RESULT_MAX_CHARS=4321&call=1"), follow=True)
        assert other.status_code == 200
    again = client.get(page_url(stored, "env.CHATCLI_TOOL_RESULT_MAX_CHARS=4322&call=1"),
                       follow=True)
    assert again.status_code == 200


# --- issue 20 item 5 (part): the insights page has a bound on the work of one request -------

def test_the_insights_page_refuses_more_replay_work_than_its_bound(personas, long_session,
                                                                   settings, monkeypatch):
    """issue 20 item 5: one GET on a 20,000-call session ran 17 minutes at 4.66 GB. A page
    now asks for at most CTXSIM_INSIGHTS_MAX_CALLS calls (calls × profiles not stored yet);
    past that the page says so and replays nothing."""
    from ctxsim.analysis import results

    settings.CTXSIM_INSIGHTS_MAX_CALLS = long_session.model_call_count  # one profile fits
    url = reverse("session-insights", args=[long_session.pk])
    client = personas.client("viewer")
    one = client.get(url + "?profiles=chatcli")
    assert one.status_code == 200 and "too long" not in one.content.decode()

    def must_not_replay(*args, **kwargs):
        raise AssertionError("the bound must be checked before any replay")

    monkeypatch.setattr(results, "replay", must_not_replay)
    two = client.get(url + "?profiles=none&profiles=aivax")  # neither stored yet
    assert two.status_code == 200
    body = two.content.decode()
    assert "too long" in body and str(long_session.model_call_count) in body


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_fold_bounds_that_are_not_ascii_numbers_are_a_404(personas, stored, number):
    """issue 20 item 15, for the folded rows of a call view (issue 21): `from=²` passed
    isdigit() and crashed int()."""
    client = personas.client("viewer")
    base = reverse("session-rows", args=[stored.pk]) + "?call=1"
    for query in (f"&from={number}&to=5", f"&from=0&to={number}"):
        assert client.get(base + query).status_code == 404, query


@pytest.mark.parametrize("number", NOT_ASCII_NUMBERS)
def test_a_per_tool_limit_that_is_not_an_ascii_number_is_reported(personas, stored, number):
    """issue 20 item 15, for per-tool limits (`Read=²` passed isdigit() and crashed int())."""
    from urllib.parse import quote

    response = personas.client("viewer").get(
        page_url(stored, "profile=claude-code&cc_persist_overrides=" + quote(f"Read={number}")),
        follow=True)
    assert response.status_code == 200
    assert "write each entry as Tool=50000 or Tool=null" in response.content.decode()


def test_downloads_and_call_jumps_that_replay_take_the_users_replay_slot(personas):
    """issue 20 item 4: a trace download, or a jump to a call no replay of this process holds,
    is a whole replay on a request thread; it takes one of the user's slots like a new
    threshold does, so one user cannot hold every thread with them. The next call's step, one
    step of the replay this process left paused, needs no slot."""
    from ctxsim.generator import generate_session
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.limits import replay_slot

    row = save_sessions([generate_session(12, seed=5)], team=personas.team)[0]
    viewer = personas.users["viewer"]
    client = personas.client("viewer")
    assert client.get(page_url(row, "call=1"), follow=True).status_code == 200
    assert client.get(page_url(row, "call=2"), follow=True).status_code == 200  # paused at 2
    trace = reverse("session-trace", args=[row.pk])
    with replay_slot(viewer):  # as if another request of theirs were replaying now
        assert client.get(trace).status_code == 429
        assert client.get(page_url(row, "call=3"), follow=True).status_code == 200
        REPLAYS.forget_replays()  # another process: nothing kept, nothing paused
        busy = client.get(page_url(row, "call=7"), follow=True)
        assert busy.status_code == 429 and "already running" in busy.content.decode()
        compare = reverse("session-compare", args=[row.pk]) + "?a=chatcli&b=none&call=8"
        assert client.get(compare).status_code == 429
        assert personas.client("reviewer").get(trace).status_code == 200
    assert client.get(trace).status_code == 200
    assert client.get(page_url(row, "call=7"), follow=True).status_code == 200
