"""Invariants of the part-2 agent stages (SPEC-agents-2) on random well-formed transcripts:
the fold's memo never changes a result, and the stages that cut between calls keep every
result with its call."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.replay import Replay
from ctxsim.pipeline.trace import history_json

from .test_agents_properties import assert_paired, transcripts

# Limits small enough that the generated transcripts (≤ ~4,000 bytes) cross them.
SMALL = {
    "gemini-cli": {"gemini_token_limit": 600, "gemini_function_response_budget": 60,
                   "gemini_mask_protect_tokens": 40, "gemini_mask_min_prunable_tokens": 20},
    "openhands-v1": {"openhands_v1_max_size": 10, "openhands_v1_keep_first": 2,
                     "openhands_v1_max_tokens": 400},
    "cline": {"cline_context_window": 300},
    "roo-code": {"roo_context_window": 500, "roo_reserved_tokens": 10},
    "aider": {"aider_max_chat_history_tokens": 150},
    "opencode": {"opencode_context_limit": 400, "opencode_max_output": 50,
                 "opencode_keep_tokens": 60, "opencode_prune_protect": 50,
                 "opencode_prune_minimum": 10},
    "mini-swe-agent": {"mini_swe_output_limit": 200, "mini_swe_head_chars": 50,
                       "mini_swe_tail_chars": 50},
}
PAIRED = ("gemini-cli", "openhands-v1", "cline", "opencode")


def _replay(h: list[Message], profile: str, config: dict[str, Any],
            use_memos: bool = True) -> list:
    rc = resolve(profile, {"counter": "bytes4", "summary_placeholder_tokens": 8, **config})
    return list(Replay(h, rc, use_memos=use_memos).calls())


@settings(max_examples=40, deadline=None)
@given(transcripts(), st.sampled_from(sorted(SMALL)), st.booleans())
def test_the_fold_memo_never_changes_a_result(h, profile, keep_last_3) -> None:
    config = dict(SMALL[profile])
    if profile == "roo-code" and keep_last_3:
        config["roo_version"] = "3.28.0"
    with_memo = _replay(h, profile, config)
    without = _replay(h, profile, config, use_memos=False)
    assert [history_json(c.sent) for c in with_memo] == [history_json(c.sent) for c in without]
    assert [[r.report for r in c.stages] for c in with_memo] == [
        [r.report for r in c.stages] for c in without]


@settings(max_examples=40, deadline=None)
@given(transcripts(), st.sampled_from(PAIRED))
def test_after_a_compaction_every_result_keeps_its_call(h, profile) -> None:
    for call in _replay(h, profile, SMALL[profile]):
        for run in call.stages:
            assert_paired(run.history)
