"""SPEC §11 on the web: calibration with the summary, the chart's recorded points, the raw
toggle, the call view's recorded vs estimated, the cache & cost page's recorded figures."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from ctxsim.pipeline.calibration import INJECTED_FRAME, call_estimates
from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.pipeline.tokens import get_counter
from ctxsim.transcripts.store import save_sessions

A, B = 12_000, 1.22
FLAGGED_CALL, INJECTED = 5, 6_000


def billed_session(a: int = A, preamble: str = "") -> Session:
    """A Claude-like session whose every call was billed a + b · estimate (cl100k), except
    one call that read 6,000 tokens of context the transcript does not show."""
    history = [Message.of("user", "Please fix the failing build." + preamble)]
    for i in range(9):
        history.append(Message.of("assistant", f"Step {i}: running the build.", tool_calls=[
            ToolCall(f"toolu_{i}", "Bash", '{"command":"make test"}')]))
        history.append(Message.of("tool", f"build output {i}\n" + "error: missing symbol\n"
                                  * (20 + 15 * i), tool_call_id=f"toolu_{i}"))
    history.append(Message.of("assistant", "Fixed: the symbol was misspelled."))
    estimates = call_estimates(history, get_counter("cl100k_base"))
    out, k = [], 0
    for m in history:
        if m.role == "assistant":
            total = round(a + B * estimates[k].estimate) + (INJECTED if k == FLAGGED_CALL else 0)
            m = Message.of("assistant", m.content, tool_calls=m.tool_calls, meta={
                "model": "claude-sonnet-4-5", "recorded": {
                    "total_input": total, "input": 3, "cache_read": total - 503,
                    "cache_write": 500, "output": 40, "reasoning": None}})
            k += 1
        out.append(m)
    return Session(format="claude-code", title="Billed build fix", messages=tuple(out),
                   meta={"model": "claude-sonnet-4-5", "provider": "anthropic"})


@pytest.fixture
def billed(personas):
    return save_sessions([billed_session()], team=personas.team,
                         user=personas.users["owner"])[0]


def chart_of(html: str) -> dict:
    found = re.search(r'<script id="chart-data" type="application/json">(.*?)</script>', html,
                      re.S)
    assert found, "the page has no chart data"
    return json.loads(found.group(1))


def page(client, session, query: str = "") -> str:
    response = client.get(reverse("session-detail", args=[session.pk]) + query, follow=True)
    assert response.status_code == 200
    return response.content.decode()


def test_the_summary_states_a_b_and_the_fit(personas, billed):
    html = page(personas.client("viewer"), billed)
    assert ("a = 12,000 tokens the transcript does not show (system prompt, tools) · "
            "b = 1.22 (tokenizer factor)") in html
    assert "robust fit (Theil–Sen) over 9 calls with recorded usage" in html
    assert "1 call flagged: context the transcript does not show" in html
    # Issue 25: with a bill the page shows the provider's tokens (anchored on it), and the
    # token model's one-step accuracy beside the in-sample fit.
    assert "Numbers shown:" in html and "<strong>the provider's tokens</strong>" in html
    assert 'id="one-step-accuracy">One step ahead (each bill predicted from earlier calls ' \
        "only): median" in html
    assert "Peak input · provider&#x27;s tokens" in html


def test_the_chart_shows_recorded_points_calibrated_lines_window_and_flags(personas, billed):
    html = page(personas.client("viewer"), billed)
    chart = chart_of(html)
    recorded = [c["recorded"]["total_input"] for c in billed_session_calls()]
    assert chart["billed"] == recorded
    assert chart["calibrated"] is True
    assert chart["flagged"] == [FLAGGED_CALL]
    assert chart["window"] == 200_000 and chart["model"] == "claude-sonnet-4-5"
    # The lines are the provider's tokens: the bill itself at every billed call (the flagged
    # one too: anchored on it).
    assert chart["raw"] == recorded


def billed_session_calls() -> list[dict]:
    return [{"recorded": m.meta["recorded"]} for m in billed_session().messages
            if m.role == "assistant"]


def test_the_raw_toggle_shows_estimates_and_survives_stepping(personas, billed):
    client = personas.client("viewer")
    calibrated = chart_of(page(client, billed))
    html = page(client, billed, "?profile=chatcli&call=2&numbers=raw")
    raw = chart_of(html)
    assert raw["calibrated"] is False
    assert raw["raw"] != calibrated["raw"]
    assert raw["billed"] == calibrated["billed"]  # the provider's figures never change
    assert "<strong>raw estimates</strong>" in html and "show calibrated" in html
    assert "&amp;numbers=raw" in html or "&numbers=raw" in html  # the stepper keeps it
    # A submitted form lands on the canonical URL, and the choice goes with it.
    response = client.get(reverse("session-detail", args=[billed.pk]) + "?call=2&numbers=raw")
    assert response.status_code == 302 and "numbers=raw" in response["Location"]


def test_the_call_view_shows_recorded_against_estimated_and_the_flag(personas, billed):
    client = personas.client("viewer")
    html = page(client, billed, f"?profile=chatcli&call={FLAGGED_CALL}")
    recorded = billed_session_calls()[FLAGGED_CALL]["recorded"]["total_input"]
    assert f"recorded by the provider <strong>{recorded:,}</strong> input tokens" in html
    assert "flagged: context the transcript does not show" in html
    difference = re.search(r"flagged: context the transcript does not show, (-?[\d,]+) tokens",
                           html)
    assert difference and abs(int(difference.group(1).replace(",", "")) - INJECTED) <= 2
    fragment = client.get(reverse("session-detail", args=[billed.pk])
                          + "?profile=chatcli&call=1", headers={"HX-Request": "true",
                                                                "HX-Target": "#call-view"})
    body = fragment.content.decode()
    assert "recorded by the provider" in body and "provider&#x27;s tokens <strong>" in body
    assert 'id="one-step">predicted from the earlier calls only:' in body
    assert "flagged:" not in body


def test_the_last_call_of_a_session_ending_in_a_result_is_the_next_call(personas, stored):
    html = page(personas.client("viewer"), stored, "?profile=chatcli&call=0")
    assert "Uncalibrated:" in html
    assert "the transcript records no usage for this call" in html
    chart = chart_of(html)
    assert chart["calibrated"] is False and chart["window"] is None
    assert all(v is None for v in chart["billed"])


def test_the_trace_download_carries_the_summarys_calibration(personas, billed):
    client = personas.client("viewer")
    page(client, billed)  # the summary is stored with its calibration
    response = client.get(reverse("session-trace", args=[billed.pk]) + "?profile=chatcli")
    trace = json.loads(b"".join(response.streaming_content) if response.streaming
                       else response.content)
    cal = trace["calibration"]
    assert cal["a"] == pytest.approx(A, abs=2) and cal["b"] == pytest.approx(B, abs=1e-3)
    assert [f["call_index"] for f in cal["flagged"]] == [FLAGGED_CALL]
    first = trace["calls"][0]
    assert first["recorded"]["total_input"] == billed_session_calls()[0]["recorded"][
        "total_input"]
    assert first["tokens"]["calibrated_raw"] == round(cal["a"] + cal["b"]
                                                      * first["tokens"]["raw"])


def test_the_cache_page_shows_recorded_reads_and_writes_beside_the_simulation(personas,
                                                                              billed):
    client = personas.client("viewer")
    response = client.get(reverse("session-insights", args=[billed.pk]))
    html = response.content.decode()
    assert "What the provider recorded" in html
    calls = billed_session_calls()
    reads = sum(c["recorded"]["cache_read"] for c in calls)
    writes = sum(c["recorded"]["cache_write"] for c in calls)
    row = re.search(r'<tr class="recorded-row">(.*?)</tr>', html, re.S).group(1)
    assert f">{reads:,}<" in row and f">{writes:,}<" in row
    assert "input tokens more than the simulation counts" in html
    assert html.count('<tr data-call="') >= len(calls)


def test_the_cache_page_says_when_nothing_was_recorded(personas, stored):
    html = personas.client("viewer").get(
        reverse("session-insights", args=[stored.pk])).content.decode()
    assert "records no usage per model call" in html


def test_outsiders_get_404_with_the_toggle_too(personas, billed):
    client = personas.client("outsider")
    assert client.get(reverse("session-detail", args=[billed.pk])
                      + "?numbers=raw").status_code == 404
    assert client.get(reverse("session-insights", args=[billed.pk])).status_code == 404


def test_a_trajectory_with_only_session_totals_says_so_and_stays_uncalibrated(personas):
    session = Session(format="swe-agent", title="Totals only", messages=(
        Message.of("user", "fix it"),
        Message.of("assistant", "ls", tool_calls=[ToolCall("a1", "bash", '"ls"')]),
        Message.of("tool", "README.md", tool_call_id="a1"),
        Message.of("assistant", "done"),
    ), meta={"model_stats": {"tokens_sent": 122_612, "api_calls": 12},
             "recorded_totals": {"calls": 12, "total_input": 122_612, "per_call": False,
                                 "cache_read_share": None}})
    (row,) = save_sessions([session], team=personas.team, user=personas.users["owner"])
    html = page(personas.client("viewer"), row)
    assert "Uncalibrated:" in html
    assert "Recorded by the provider (whole session only): 122,612 input tokens over 12 calls" \
        in html


def test_a_negative_offset_is_explained(personas):
    # ctxsim over-counts something every request carries (here: billed 2,000 below the line).
    session = billed_session(a=-2_000, preamble=" Log:\n" + "warning: deprecated call\n" * 400)
    (row,) = save_sessions([session], team=personas.team, user=personas.users["owner"])
    html = page(personas.client("viewer"), row)
    offset = re.search(r"a = (-[\d,]+) tokens the transcript does not show", html)
    assert offset and abs(int(offset.group(1).replace(",", "")) + 2_000) <= 2
    assert "a is negative: ctxsim counts more than the provider billed" in html


def test_compare_and_notes_are_in_the_unit_of_the_session_page(personas, billed):
    """Issue 26: compare showed ctxsim's count unlabelled beside the session page's
    calibrated peak, and the auto-compact note a third figure."""
    client = personas.client("viewer")
    html = page(client, billed, "?profile=claude-code")
    peak = re.search(r"Peak input · provider&#x27;s tokens</small><strong>([\d,]+)<", html)
    assert peak
    compare = client.get(reverse("session-compare", args=[billed.pk]),
                         {"profile": "claude-code", "b": "none"}).content.decode()
    assert "Tokens sent per call, in provider&#x27;s tokens." in compare
    assert f"Peak · provider&#x27;s tokens</small><strong>{peak.group(1)}<" in compare
    note = re.search(r"auto-compact never fired: the conversation peaked at ([\d,]+) tokens "
                     r"\(the provider&#x27;s tokens, anchored on the recorded bill\)", html)
    assert note and note.group(1) == peak.group(1)


def test_the_call_view_names_what_the_agent_injected_apart_and_its_tokens(personas):
    """Claude Code 2.1's attachment records (a nested CLAUDE.md): the call they joined says
    what was injected and what it counted, as untrusted text."""
    history = list(billed_session().messages)
    carrier = next(i for i, m in enumerate(history)
                   if m.role == "assistant" and m.text.startswith("Step 3:"))
    name, text = "/repo/app/<b>CLAUDE.md</b>", "Use the design tokens.\n" * 50
    history[carrier] = Message.of("assistant", history[carrier].content,
                                  tool_calls=history[carrier].tool_calls, meta={
                                      **history[carrier].meta, "injected_context": [{
                                          "type": "nested_memory", "name": name,
                                          "text": text}]})
    session = Session(format="claude-code", title="Injected", messages=tuple(history),
                      meta={"model": "claude-sonnet-4-5", "provider": "anthropic"})
    row = save_sessions([session], team=personas.team, user=personas.users["owner"])[0]
    client = personas.client("viewer")
    tokens = INJECTED_FRAME + get_counter("cl100k_base").count(f"{name}\n{text}".encode())
    html = page(client, row, "?profile=claude-code&call=3")
    assert ("injected by the agent before this call, in what was billed but in no message: "
            f"nested_memory <code>/repo/app/&lt;b&gt;CLAUDE.md&lt;/b&gt;</code> ({tokens:,} "
            "tokens).") in html
    assert 'id="call-injected"' not in page(client, row, "?profile=claude-code&call=2")
