"""A Claude Code session with a recorded compaction, in a real browser: the chart draws the
recorded and the simulated compactions with their own glyphs (issue 16, acceptance 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from ctxsim.importers import load
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)

FIXTURE = Path(__file__).parent.parent / "importers" / "fixtures" / "claude-code-compacted.jsonl"


def dataset_labels(page) -> list[str]:
    return page.evaluate(
        "Chart.getChart(document.getElementById('tokens-chart')).data.datasets"
        ".map(function (d) { return d.label; })")


def test_recorded_and_simulated_compactions_get_their_own_glyphs(personas, live_server, login):
    stored = save_sessions(load(FIXTURE).sessions, team=personas.team,
                           user=personas.users["owner"])[0]
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{stored.pk}/?call=2")
    expect(page.locator("#call-view")).to_contain_text("Claude Code compacted here")
    assert "compacted (recorded)" in dataset_labels(page)
    assert "compacted (simulated)" not in dataset_labels(page)
    page.goto(f"{live_server.url}/sessions/{stored.pk}/?profile=claude-code&counter=bytes4"
              "&cc_context_window=60&cc_max_output_tokens=10&cc_autocompact_buffer_tokens=10")
    expect(page.locator("#recorded-vs-simulated")).to_contain_text("earlier")
    assert {"compacted (recorded)", "compacted (simulated)"} <= set(dataset_labels(page))
