"""The call view shows what changed at the call and folds the rest (issue 21): every row is
either shown or in exactly one fold, a fold loads exactly its rows (access-checked like the
page), a commented message is never folded away, and the spill viewer pages its lines."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from ctxsim.replays import call_view, page, run_figures, services
from ctxsim.replays.state import ReplaySettings
from ctxsim.reviews.models import Comment
from ctxsim.transcripts.models import Session

HTMX_CALL = {"HX-Request": "true", "HX-Target": "div#call-view"}
HTMX = {"HX-Request": "true"}


def _page(row: Session, query: str) -> str:
    return reverse("session-detail", args=[row.pk]) + f"?{query}"


def _row_ids(html: str, call: int) -> list[int]:
    return [int(n) for n in re.findall(rf'<li class="msg [^"]*" id="msg-{call}-(\d+)"', html)]


def _folds(html: str) -> list[tuple[int, int, str]]:
    return [(int(a), int(b), url.replace("&amp;", "&")) for a, b, url in re.findall(
        r'<li class="fold" id="fold-\d+-\d+" data-from="(\d+)" data-to="(\d+)">'
        r'<a class="unfold" href="([^"]+)"', html)]


@pytest.fixture
def late(personas, long_session, monkeypatch):
    """The long session's last call under chatcli: dozens of rows, most of them unchanged,
    its rows rewritten at earlier calls folded as a long session's are."""
    monkeypatch.setattr(call_view, "CARRIED_SHOWN", 0)
    settings = ReplaySettings()
    run = services.summary_for(long_session, settings)
    call = len(run.calls) - 1
    detail = services.call_detail(long_session, settings, run, call)
    return long_session, call, detail


def test_every_row_is_shown_or_folded_once_and_changed_rows_are_always_shown(personas, late):
    # (No run of rows changed alike here is long enough to fold its middle: see below.)
    session, call, detail = late
    html = personas.client("viewer").get(_page(session, f"profile=chatcli&call={call}"),
                                          headers=HTMX_CALL).content.decode()
    shown = _row_ids(html, call)
    folds = _folds(html)
    assert folds, "a late call of a long session folds its unchanged rows"
    covered = sorted([*shown, *(i for a, b, _ in folds for i in range(a, b))])
    assert covered == list(range(len(detail.view.rows)))
    for i, row in enumerate(detail.view.rows):
        if call_view.changed_here(row):
            assert i in shown
    assert all(b - a >= call_view.FOLD_MIN for a, b, _ in folds)


def test_a_fold_loads_exactly_its_rows_as_the_call_view_renders_them(personas, late):
    session, call, detail = late
    client = personas.client("viewer")
    html = client.get(_page(session, f"profile=chatcli&call={call}"),
                      headers=HTMX_CALL).content.decode()
    start, end, url = _folds(html)[0]
    loaded = client.get(url, headers=HTMX).content.decode()
    assert _row_ids(loaded, call) == list(range(start, end))
    assert not loaded.startswith("<ol")  # swapped in place of the fold's <li>
    # The same HTML the call view would have shown for those rows.
    full = call_view.render_rows(page.call_rows(detail), session_id=session.pk, call_index=call,
                            query=ReplaySettings().query())
    for _position, _origin, opened in full[start:end]:
        assert opened in loaded
    # Without JavaScript the link opens the rows on a page of their own.
    plain = client.get(url)
    assert plain.status_code == 200 and "<html" in plain.content.decode().lower()
    assert personas.client("outsider").get(url).status_code == 404


def test_a_long_fold_loads_a_page_of_rows_and_folds_the_rest(personas, late, monkeypatch):
    session, call, detail = late
    monkeypatch.setattr(call_view, "FOLD_PAGE", 3)
    url = (reverse("session-rows", args=[session.pk])
           + f"?{ReplaySettings().query()}&call={call}&from=0&to=9")
    loaded = personas.client("viewer").get(url, headers=HTMX).content.decode()
    assert _row_ids(loaded, call) == [0, 1, 2]
    assert [(a, b) for a, b, _ in _folds(loaded)] == [(3, 9)]


def test_bad_fold_bounds_are_a_404(personas, late):
    session, call, _detail = late
    base = reverse("session-rows", args=[session.pk]) + f"?profile=chatcli&call={call}"
    client = personas.client("viewer")
    for bounds in ("from=5&to=2", "from=x&to=3", "from=100000&to=100005", ""):
        assert client.get(f"{base}&{bounds}").status_code == 404


def test_a_commented_message_inside_a_fold_is_shown_with_its_comment(personas, late):
    session, call, _detail = late
    client = personas.client("viewer")
    html = client.get(_page(session, f"profile=chatcli&call={call}"),
                      headers=HTMX_CALL).content.decode()
    start, end, _url = _folds(html)[0]
    pack = call_view.call_pack(session, ReplaySettings(), services.summary_for(
        session, ReplaySettings()), call)
    origin = next(pack.origins[i] for i in range(start, end) if pack.origins[i] is not None)
    Comment.objects.create(session=session, author=personas.users["reviewer"],
                           call_index=call, message_index=origin, body="look here")
    html = client.get(_page(session, f"profile=chatcli&call={call}"),
                      headers=HTMX_CALL).content.decode()
    assert f'data-origin="{origin}"' in html
    assert "look here" in html
    folded = {i for a, b, _ in _folds(html) for i in range(a, b)}
    assert pack.origins.index(origin) not in folded


def test_rows_changed_at_earlier_calls_are_shown_while_a_call_has_few():
    from ctxsim.pipeline.messages import Message
    from ctxsim.replays.analysis import MessageRow

    rows = [MessageRow("unchanged", Message.of("user", "x"), None, 0) for _ in range(40)]
    for i in (10, 20, 30):
        rows[i] = MessageRow("rewritten", Message.of("tool", "stub"), None, 0, carried=True)
    few = call_view.shown_positions(rows)
    assert few[10] and few[20] and few[30]
    import unittest.mock

    with unittest.mock.patch.object(call_view, "CARRIED_SHOWN", 2):
        many = call_view.shown_positions(rows)
    assert not (many[10] or many[20] or many[30])


def test_a_long_run_of_rows_changed_alike_at_the_call_folds_its_middle_and_says_how():
    """A compaction call removes thousands of messages at once: rendered each, one call view
    of a 3,050-call Claude Code session was 20 MB (and its worker's pack grew the import's
    memory by half). The run's first and last RUN_EDGE rows are shown, the middle folds as
    "N messages removed"."""
    from ctxsim.pipeline.messages import Message
    from ctxsim.replays.analysis import MessageRow
    from ctxsim.replays.message_list import fold_html

    def row(status: str) -> MessageRow:
        return MessageRow(status, Message.of("user", "x"), None, 1)

    edge, least, window = call_view.RUN_EDGE, call_view.FOLD_MIN, call_view.WINDOW
    rows = ([row("unchanged")] * 3 + [row("removed")] * 100 + [row("injected")]
            + [row("unchanged")] * 3)
    shown = call_view.shown_positions(rows)
    removed = range(3, 103)
    # The edges with their window of context.
    assert [i for i in removed if shown[i]] == [*removed[:edge + window],
                                                *removed[-edge - window:]]
    (fold,) = call_view.folds_of(rows, shown)
    assert (fold.start, fold.end, fold.status) == (3 + edge + window, 103 - edge - window,
                                                   "removed")
    html = fold_html(fold, session_id=1, call_index=0, query="profile=chatcli")
    assert f"{fold.count:,} messages removed" in html and "&amp;fold=removed" in html
    # A run no longer than both edges with their windows and a fold's least is shown whole.
    most = 2 * (edge + window) + least
    short = [row("rewritten")] * most + [row("unchanged")] * 10
    assert all(call_view.shown_positions(short)[:most])
    longer = [row("rewritten")] * (most + 1) + [row("unchanged")] * 10
    assert sum(not s for s in call_view.shown_positions(longer)[:most + 1]) == least + 1


def test_the_rest_of_a_loaded_fold_says_what_the_fold_said(personas, late, monkeypatch):
    session, call, _detail = late
    monkeypatch.setattr(call_view, "FOLD_PAGE", 3)
    base = (reverse("session-rows", args=[session.pk])
            + f"?{ReplaySettings().query()}&call={call}&from=0&to=9")
    client = personas.client("viewer")
    said = client.get(base + "&fold=removed", headers=HTMX).content.decode()
    assert "6 messages removed" in said
    for bad in ("<b>x</b>", "unchanged", "nonsense"):
        plain = client.get(base + "&fold=" + bad, headers=HTMX).content.decode()
        assert "6 messages not changed at this call" in plain and "<b>x" not in plain


def test_unchanged_runs_shorter_than_the_minimum_are_shown_not_folded():
    from ctxsim.pipeline.messages import Message
    from ctxsim.replays.analysis import MessageRow

    def row(status: str) -> MessageRow:
        return MessageRow(status, Message.of("user", "x"), None, 0)

    rows = [row("unchanged") for _ in range(30)]
    rows[10] = row("rewritten")
    rows[20] = row("removed")
    shown = call_view.shown_positions(rows)
    folds = call_view.folds_of(rows, shown)
    assert [i for i, s in enumerate(shown) if s] == [0, 1, 8, 9, 10, 11, 12, 18, 19, 20, 21, 22,
                                                     27, 28, 29]
    assert [(f.start, f.end) for f in folds] == [(2, 8), (13, 18), (23, 27)]


def test_the_spill_viewer_shows_500_lines_and_pages_through_the_rest():
    from ctxsim.replays.spills import spill_lines

    data = "\n".join(f"line {n}" for n in range(1, 1201)).encode()
    first = spill_lines(data, None, None)
    assert (first["first"], first["last"], first["total_lines"]) == (1, 500, 1200)
    assert first["previous_range"] is None and first["next_range"] == (501, 1000)
    last = spill_lines(data, "1001", "")
    assert (last["first"], last["last"], last["next_range"]) == (1001, 1200, None)
    assert last["previous_range"] == (501, 1000)
    # A range asked wider than a page is cut to one.
    wide = spill_lines(data, "1", "1200")
    assert (wide["first"], wide["last"]) == (1, 500)
    assert wide["lines"][-1] == (500, "line 500")


def test_a_long_sessions_chart_groups_calls_without_hiding_failures_or_the_selected_call():
    n = 2500
    chart = {"labels": list(range(n)), "raw": [i * 2 for i in range(n)],
             "sent": [i if i != 1234 else 10**9 for i in range(n)], "failed": [7, 2001],
             "spills": [3, 4, 5], "comments": {"8": 2, "9": 1}, "limit": None,
             "limitLabel": "", "selected": 1500, "counter": "cl100k_base"}
    thin = run_figures.thin_chart(chart, points=1000)
    assert len(thin["labels"]) == len(thin["raw"]) == len(thin["sent"]) <= 1000
    assert thin["grouped"] == 3
    assert 1500 in thin["labels"] and 1234 in thin["labels"]
    assert set(thin["failed"]) == {7, 2001} <= set(thin["labels"])
    assert max(thin["sent"]) == 10**9 and max(thin["raw"]) == (n - 1) * 2
    assert set(thin["spills"]) <= set(thin["labels"]) and thin["spills"]
    assert sum(thin["comments"].values()) == 3
    assert set(thin["comments"]) <= set(thin["labels"])
    # A short session's chart is every call, as it was.
    short = {**chart, "labels": [0, 1], "raw": [1, 2], "sent": [1, 2], "failed": [],
             "spills": [], "comments": {}, "selected": 0}
    assert run_figures.thin_chart(short) == short


def test_thresholds_that_spill_without_bound_get_a_clear_400_not_a_500(personas, long_session,
                                                                      monkeypatch):
    """A cap below most results re-spills them at every call (n²/12 files): past MAX_SPILLS the
    replay stops and the page says at which call and what to change."""
    from ctxsim.pipeline import spill
    from ctxsim.replays.cache import REPLAYS

    monkeypatch.setattr(spill, "MAX_SPILLS", 5)
    REPLAYS.clear()
    url = _page(long_session, "profile=chatcli&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS=50")
    response = personas.client("viewer").get(url)
    assert response.status_code == 400
    text = response.content.decode()
    assert "stopped at call" in text and "CHATCLI_TOOL_RESULT_MAX_CHARS" in text
