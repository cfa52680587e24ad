"""Insights written as JSON data read back equal, so a stored result stands for a replay."""

from __future__ import annotations

import json

from ctxsim.generator import generate_session
from ctxsim.insights.prices import cache_rule
from ctxsim.insights.report import analyse, as_data, from_data
from ctxsim.pipeline.replay import replay
from tests.factories import lost_path_transcript, rereading_transcript


def _roundtrip(insights, rule):
    return from_data(rule, json.loads(json.dumps(as_data(insights))))


# Clear every tool result but the newest one (what makes the agent read a file again).
CLEAR = {"trigger": {"type": "tool_uses", "value": 1}, "keep": {"type": "tool_uses", "value": 1}}


def test_stored_insights_read_back_equal_for_breaks_rereads_and_lost_references():
    rule = cache_rule("claude-sonnet-4.5")
    found = {"events": 0, "rereads": 0, "lost": 0}
    for messages, profile, config in (
            (generate_session(40, seed=2, oversize_every=3).messages, "chatcli", {}),
            (rereading_transcript(), "anthropic-clear-tool-uses", CLEAR),
            (lost_path_transcript(), "anthropic-clear-tool-uses", CLEAR)):
        insights = analyse(replay(messages, profile, config), rule)
        found["events"] += len(insights.events)
        found["rereads"] += len(insights.loss.rereads)
        found["lost"] += len(insights.loss.lost)
        back = _roundtrip(insights, rule)
        assert back == insights
        assert (back.cost, back.hit_rate, back.never_paid_back) == (
            insights.cost, insights.hit_rate, insights.never_paid_back)
    assert all(found.values()), found  # every kind of finding went through the round trip


def test_a_result_of_another_version_is_not_read():
    rule = cache_rule("gpt-5")
    data = as_data(analyse(replay(rereading_transcript(), "none"), rule))
    assert from_data(rule, {**data, "version": -1}) is None
