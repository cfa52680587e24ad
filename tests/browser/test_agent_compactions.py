"""A Claude Code session with a recorded compaction, in a real browser (issue 16, acceptance
2): the chart marks the recorded compaction, the "Recorded vs simulated compactions" list
shows it beside the profile's prediction, and lowering the threshold in the form moves the
simulated compaction earlier (a glyph of its own on the chart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from ctxsim.importers import load
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURE = Path(__file__).parent.parent / "importers" / "fixtures" / "claude-code-compacted.jsonl"
RECORDED_CALL = 2  # the compact_boundary + summary come after the second model call


def marked_calls(page, label: str) -> list[int] | None:
    """The calls the chart dataset `label` has a point at (None: no such dataset)."""
    return page.evaluate(
        "(label) => { var c = Chart.getChart(document.getElementById('tokens-chart'));"
        " var d = c.data.datasets.find(function (s) { return s.label === label; });"
        " if (!d) return null;"
        " return c.data.labels.filter(function (x, n) { return d.data[n] !== null; }); }",
        label)


def first_row(page) -> list[str]:
    return page.locator("#recorded-vs-simulated tbody tr").first.locator("td").all_inner_texts()


def test_the_recorded_compaction_is_on_the_chart_and_lowering_the_threshold_predicts_it_earlier(
        personas, live_server, login):
    stored = save_sessions(load(FIXTURE).sessions, team=personas.team,
                           user=personas.users["owner"])[0]
    page = login("reviewer")
    # No profile in the URL: a Claude Code session opens with the claude-code profile. The
    # counter token source: with the default (anchored) the bill of call 1 (167,006) is over
    # the threshold and the prediction is one call before the recorded compaction (pinned in
    # tests/pipeline/test_token_model.py).
    page.goto(f"{live_server.url}/sessions/{stored.pk}/?call={RECORDED_CALL}"
              "&cc_token_source=counter")
    expect(page.locator("#profile-select")).to_have_value("claude-code")
    expect(page.locator("#call-view")).to_contain_text(
        "Claude Code compacted here: 167,648 tokens before (auto).")
    assert marked_calls(page, "compacted (recorded)") == [RECORDED_CALL]
    assert marked_calls(page, "compacted (simulated)") is None
    listing = page.locator("#recorded-vs-simulated")
    expect(listing).to_contain_text("ctxsim there (calibrated)")
    row = first_row(page)
    assert row[0] == str(RECORDED_CALL) and row[2] == "167,648" and row[-1] == "not predicted"
    assert row[3].replace(",", "").isdigit()  # ctxsim's calibrated count at the recorded call

    # Lower the auto-compact threshold in the thresholds form. Values are set without change
    # events (each would replay on its own) and applied once with the form's button.
    form = page.locator("#settings")
    for name, value in (("counter", "bytes4"), ("cc_context_window", "60"),
                        ("cc_max_output_tokens", "10"), ("cc_autocompact_buffer_tokens", "10")):
        form.locator(f"#f-{name}").evaluate("(el, v) => { el.value = v; }", value)
    form.locator("button[name=submit]").click()
    expect(listing).to_contain_text("earlier", timeout=20_000)
    expect(page.locator("#form-errors")).to_be_hidden()
    row = first_row(page)
    assert row[0] == str(RECORDED_CALL) and row[-1] == "earlier"
    predicted = int(row[4])
    assert predicted < RECORDED_CALL
    assert row[5].replace(",", "").isdigit()  # and at the predicted call
    simulated = marked_calls(page, "compacted (simulated)")
    assert simulated and simulated[0] == predicted
    assert marked_calls(page, "compacted (recorded)") == [RECORDED_CALL]
