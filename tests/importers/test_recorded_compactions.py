"""Recorded compactions kept by the importers (SPEC-agents §2.5.0.5) and replayed or
predicted by the Claude Code and Anthropic stages (§2.5.3, §2.5.8), from hand-made fixtures
in the documented shapes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ctxsim.cli import main
from ctxsim.importers import load

FIXTURES = Path(__file__).parent / "fixtures"
CLAUDE = FIXTURES / "claude-code-compacted.jsonl"
ANTHROPIC = FIXTURES / "anthropic-messages-compaction.json"


def simulate(path: Path, tmp_path: Path, profile: str, **config: Any) -> dict[str, Any]:
    args = [str(path), "--profile", profile, "--summary"]
    if config:
        cfg = tmp_path / "config.json"
        cfg.write_text(json.dumps(config))
        args += ["--config", str(cfg)]
    out, err = io.StringIO(), io.StringIO()
    assert main(args, out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def kinds(trace: dict[str, Any]) -> list[tuple[str, int, str]]:
    return [(e["stage"], e["call_index"], e["kind"]) for e in trace["compactions"]]


def test_claude_code_boundaries_become_markers_on_the_next_message() -> None:
    (session,) = load(CLAUDE).sessions
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "user", "assistant", "user", "user",
                     "assistant"]
    summary = session.messages[5]
    assert summary.meta["compaction"] == {
        "source": "claude-code", "kind": "summary", "trigger": "auto", "pre_tokens": 167648,
        "boundary_uuid": "b-1", "logical_parent_uuid": "a-2", "preserved_uuids": []}
    assert summary.meta["compact_summary"] is True
    assert session.messages[3].meta["microcompaction"] == {
        "trigger": "auto", "pre_tokens": 90000, "tokens_saved": 20,
        "compacted_tool_ids": ["toolu_1"], "cleared_attachment_uuids": []}
    assert [m.meta["uuid"] for m in session.messages] == [
        "u-1", "a-1", "u-2", "u-3", "a-2", "u-4", "u-5", "a-3"]
    assert session.meta["recorded_compactions"] == [
        {"source": "claude-code", "message_index": 3, "trigger": "auto", "pre_tokens": 90000,
         "summary_present": False, "kind": "microcompact"},
        {"source": "claude-code", "message_index": 5, "trigger": "auto",
         "pre_tokens": 167648, "summary_present": True, "kind": "summary"}]


def test_a_boundary_without_its_summary_marks_the_next_message_boundary_only(
        tmp_path: Path) -> None:
    lines = [json.loads(x) for x in CLAUDE.read_text().splitlines()]
    kept = [x for x in lines if x.get("uuid") != "u-4"]
    for x in kept:
        if x.get("uuid") == "u-5":
            x["parentUuid"] = "b-1"
    path = tmp_path / "boundary-only.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in kept))
    (session,) = load(path).sessions
    marked = [m for m in session.messages if "compaction" in m.meta]
    assert len(marked) == 1 and marked[0].text.startswith("now use Decimal")
    assert marked[0].meta["compaction"]["kind"] == "boundary_only"
    trace = simulate(path, tmp_path, "claude-code-recorded")
    # The placeholder stands in for the summary at the marked message.
    call = trace["calls"][2]["claude_code_autocompact"]
    assert (call["compacted"], call["summary_source"]) == (True, "placeholder")


def test_the_recorded_profile_replays_both_compactions_at_their_calls(tmp_path: Path) -> None:
    trace = simulate(CLAUDE, tmp_path, "claude-code-recorded")
    assert kinds(trace) == [("claude_code_autocompact", 2, "recorded")]
    assert [(e["message_index"], e["call_index"]) for e in trace["recorded_compactions"]] == [
        (3, 1), (5, 2)]
    micro = trace["calls"][1]["claude_code_microcompact"]
    assert (micro["applied"], micro["cleared_tool_ids"]) == (True, ["toolu_1"])
    auto = trace["calls"][2]["claude_code_autocompact"]
    assert auto["summary_source"] == "recorded" and auto["recorded_pre_tokens"] == 167648


def test_predicted_under_the_default_threshold_the_recorded_one_is_not_predicted(
        tmp_path: Path) -> None:
    # ctxsim's own count of this hand-made file is far below the threshold.
    trace = simulate(CLAUDE, tmp_path, "claude-code", cc_token_source="counter")
    assert kinds(trace) == [("claude_code_autocompact", 2, "recorded_not_predicted")]
    # The session's model (Sonnet 4.5) gives the 200K window: threshold 167000.
    assert trace["calls"][0]["claude_code_autocompact"]["threshold"] == 167000


def test_anchored_on_the_bill_the_compaction_is_predicted_where_the_bill_crosses(
        tmp_path: Path) -> None:
    """The default token source: call 1 was billed 167,006 ≥ 167,000, so the simulation
    compacts there; Claude Code itself decided from that response's usage, one call later."""
    trace = simulate(CLAUDE, tmp_path, "claude-code")
    assert kinds(trace) == [("claude_code_autocompact", 1, "predicted"),
                            ("claude_code_autocompact", 2, "recorded_not_predicted")]
    report = trace["calls"][1]["claude_code_autocompact"]
    assert report["tokens_before"] == 167_006 and report["token_unit"] == "provider"


def test_a_lower_threshold_moves_the_simulated_compaction_earlier(tmp_path: Path) -> None:
    trace = simulate(CLAUDE, tmp_path, "claude-code", counter="bytes4",
                     cc_context_window=60, cc_max_output_tokens=10,
                     cc_autocompact_buffer_tokens=10, summary_placeholder_tokens=10)
    first = kinds(trace)[0]
    assert first[2] == "predicted" and first[1] < 2


def test_anthropic_compaction_blocks_are_kept_and_replayed(tmp_path: Path) -> None:
    (session,) = load(ANTHROPIC).sessions
    assert session.messages[2].meta["anthropic_compaction"] == {
        "content": "The user pasted a long log and asked for its first error."}
    assert session.messages[4].meta["anthropic_compaction"] == {"content": None}
    trace = simulate(ANTHROPIC, tmp_path, "anthropic-compact",
                     anthropic_compact_mode="recorded")
    # The block of the first response is learnt at the next call; the null one is a no-op.
    assert kinds(trace) == [("anthropic_compact", 0, "recorded")]
    assert [e["call_index"] for e in trace["recorded_compactions"]] == [0, 1]
    call1 = trace["calls"][1]["anthropic_compact"]
    assert call1["summary_source"] == "recorded" and call1["dropped_messages"] == 0
    assert trace["calls"][2]["anthropic_compact"]["summary_source"] == "recorded"


def test_odd_compaction_metadata_is_kept_without_breaking_the_replay(tmp_path: Path) -> None:
    lines = [json.loads(x) for x in CLAUDE.read_text().splitlines()]
    for x in lines:
        if x.get("subtype") == "compact_boundary":
            x["compactMetadata"] = {"trigger": ["auto"], "preTokens": "lots"}
        if x.get("subtype") == "microcompact_boundary":
            x["microcompactMetadata"] = "oops"
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (session,) = load(path).sessions
    assert session.messages[5].meta["compaction"]["pre_tokens"] == "lots"
    from ctxsim.pipeline.registry import STAGES

    trace = simulate(path, tmp_path, "claude-code-recorded")
    report = trace["calls"][2]["claude_code_autocompact"]
    assert report["compacted"] is True
    assert "lots" not in STAGES["claude_code_autocompact"].describe(report)
