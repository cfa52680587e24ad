"""Invariants of the Codex and OpenHands stages on random well-formed transcripts: after any
compaction or condensation every result still has its call and every call its result, and the
fold's memo never changes a result."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.replay import Replay
from ctxsim.pipeline.trace import history_json

from .test_agents_properties import assert_paired, transcripts


def _replay(h: list[Message], profile: str, config: dict[str, Any],
            use_memos: bool = True) -> list:
    rc = resolve(profile, {"counter": "bytes4", **config})
    return list(Replay(h, rc, use_memos=use_memos).calls())


def _stage(call: Any, name: str) -> Any:
    return next(r for r in call.stages if r.stage == name)


@settings(max_examples=60)
@given(transcripts(), st.integers(50, 600), st.integers(0, 40), st.booleans())
def test_after_codex_autocompact_the_history_stays_paired(h, window, budget, override) -> None:
    config = {"codex_config": {"model_context_window": window, "tool_output_token_limit": 20},
              "codex_user_message_budget": budget, "summary_placeholder_tokens": 10,
              "codex_limit_semantics": "override" if override else "min"}
    for call in _replay(h, "codex", config):
        run = _stage(call, "codex_autocompact")
        assert_paired(run.history)
        if run.report["compacted"]:
            summaries = [m for m in run.history if m.meta.get("kind") == "placeholder_summary"]
            assert len(summaries) == 1 and summaries[0].role == "user"
            assert all(m.role in ("system", "user") for m in run.history[
                :run.history.index(summaries[0])])


CONDENSERS = st.one_of(
    st.builds(lambda w: {"type": "observation_masking", "attention_window": w},
              st.integers(1, 8)),
    st.builds(lambda k, n: {"type": "recent", "keep_first": k, "max_events": n},
              st.integers(0, 3), st.integers(1, 10)),
    st.builds(lambda k, n: {"type": "amortized", "keep_first": k, "max_size": n},
              st.integers(0, 1), st.integers(4, 12)),
    st.builds(lambda k, n: {"type": "llm", "llm_config": "c", "keep_first": k, "max_size": n},
              st.integers(0, 1), st.integers(4, 12)),
    st.builds(lambda k, n: {"type": "llm_attention", "llm_config": "c", "keep_first": k,
                            "max_size": n}, st.integers(0, 1), st.integers(4, 12)),
    st.just({"type": "conversation_window"}),
    st.builds(lambda n: {"type": "pipeline", "condensers": [
        {"type": "conversation_window"}, {"type": "observation_masking", "attention_window": 3},
        {"type": "llm", "llm_config": "c", "keep_first": 1, "max_size": n}]}, st.integers(4, 12)),
)


@settings(max_examples=80)
@given(transcripts(), CONDENSERS, st.sampled_from(["v0", "plain"]), st.integers(20, 400))
def test_after_the_openhands_condenser_the_history_stays_paired(h, condenser, assembly,
                                                                over) -> None:
    config = {"openhands_condenser_config": condenser, "openhands_assembly": assembly,
              "openhands_request_over_tokens": over, "summary_placeholder_tokens": 5,
              "openhands_max_message_chars": 50}
    for call in _replay(h, "openhands", config):
        run = _stage(call, "openhands_condenser")
        assert_paired(run.history)
        assert run.report["forgotten_total"] >= 0


@settings(max_examples=40)
@given(transcripts(), st.integers(50, 400), CONDENSERS)
def test_the_fold_memo_never_changes_a_codex_or_openhands_result(h, window, condenser) -> None:
    for profile, config in (
            ("codex", {"codex_config": {"model_context_window": window},
                       "summary_placeholder_tokens": 10}),
            ("openhands", {"openhands_condenser_config": condenser,
                           "openhands_request_over_tokens": window})):
        with_memo = _replay(h, profile, config)
        without = _replay(h, profile, config, use_memos=False)
        assert [history_json(c.sent) for c in with_memo] == [
            history_json(c.sent) for c in without]
        assert [[r.report for r in c.stages] for c in with_memo] == [
            [r.report for r in c.stages] for c in without]
