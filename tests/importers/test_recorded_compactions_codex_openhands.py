"""Recorded compactions kept by the Codex and OpenHands importers (SPEC-agents §2.5.0.5), and
their replay by the agents' profiles. Fixtures are hand-made from the documented shapes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ctxsim.cli import main
from ctxsim.importers import load

ENCRYPTED = "A" * 40


def _line(kind: str, payload: dict[str, Any]) -> str:
    return json.dumps({"timestamp": "2026-03-01T10:00:00Z", "type": kind, "payload": payload})


def _text(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


ROLLOUT = "\n".join([
    _line("session_meta", {"id": "s1", "cwd": "/w", "instructions": "You are Codex."}),
    _line("turn_context", {"model": "gpt-5.2-codex",
                           "truncation_policy": {"mode": "bytes", "limit": 4000}}),
    _line("response_item", _text("user", "fix the bug")),
    _line("response_item", {"type": "function_call", "name": "shell",
                            "arguments": '{"command":["ls"]}', "call_id": "call_1"}),
    _line("response_item", {"type": "function_call_output", "call_id": "call_1",
                            "output": "file.txt"}),
    _line("event_msg", {"type": "token_count", "info": {
        "last_token_usage": {"total_tokens": 500}, "model_context_window": 272000}}),
    _line("compacted", {"message": "", "replacement_history": [
        _text("developer", "dev"), _text("user", "fix the bug"),
        {"type": "compaction", "encrypted_content": ENCRYPTED}]}),
    _line("event_msg", {"type": "context_compacted"}),
    _line("turn_context", {"model": "gpt-5.2-codex"}),
    _line("response_item", _text("user", "now add tests")),
    _line("response_item", {"type": "function_call", "name": "shell", "arguments": "{}",
                            "call_id": "call_2"}),
    _line("response_item", {"type": "function_call_output", "call_id": "call_2",
                            "output": "ok"}),
    _line("event_msg", {"type": "context_compacted"}),
    _line("response_item", _text("assistant", "done")),
    _line("response_item", {"type": "compaction_summary", "encrypted_content": "B" * 8}),
]) + "\n"


def _codex(tmp_path: Path):
    path = tmp_path / "rollout-2026-03-01T10-00-00-s1.jsonl"
    path.write_text(ROLLOUT)
    (session,) = load(path).sessions
    return path, session


def test_codex_keeps_the_compacted_line_with_its_replacement_history(tmp_path: Path) -> None:
    _, session = _codex(tmp_path)
    compacted = next(m for m in session.messages if m.meta.get("compacted"))
    marker = compacted.meta["compaction"]
    assert marker["source"] == "codex" and marker["kind"] == "summary"
    assert marker["message_present"] is False
    assert marker["replacement_history"] == [
        {"role": "system", "content": "dev"},
        {"role": "user", "content": "fix the bug"},
        {"role": "user", "content": "", "meta": {
            "kind": "codex_compaction_item",
            "binary_parts": [{"type": "encrypted_compaction", "base64_length": 40}]}},
    ]
    assert compacted.meta["context_compacted_event"] is True
    json.dumps(dict(compacted.meta))  # stored as JSON


def test_a_lone_context_compacted_event_marks_the_next_message(tmp_path: Path) -> None:
    _, session = _codex(tmp_path)
    done = next(m for m in session.messages if m.role == "assistant" and m.text == "done")
    assert done.meta["compaction"] == {"source": "codex", "kind": "boundary_only"}


def test_codex_keeps_truncation_policies_window_and_compaction_items(tmp_path: Path) -> None:
    _, session = _codex(tmp_path)
    results = {m.tool_call_id: m for m in session.messages if m.role == "tool"}
    assert results["call_1"].meta["codex_truncation_policy"] == {"mode": "bytes", "limit": 4000}
    assert "codex_truncation_policy" not in results["call_2"].meta
    item = session.messages[-1]
    assert (item.role, item.content, item.meta["kind"]) == ("user", b"", "codex_compaction_item")
    assert item.meta["binary_parts"] == [{"type": "encrypted_compaction", "base64_length": 8}]
    assert session.meta["model_context_window"] == 272000
    kinds = [(e["source"], e["kind"], e["summary_present"])
             for e in session.meta["recorded_compactions"]]
    assert kinds == [("codex", "summary", False), ("codex", "boundary_only", False)]


def _simulate(path: Path, profile: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path), "--profile", profile, "--summary"], out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_the_codex_recorded_profile_replays_both_compactions(tmp_path: Path) -> None:
    path, _ = _codex(tmp_path)
    trace = _simulate(path, "codex-recorded")
    assert [(e["call_index"], e["kind"]) for e in trace["compactions"]] == [
        (1, "recorded"), (2, "recorded")]
    call1 = trace["calls"][1]["codex_autocompact"]
    assert call1["summary_source"] == "recorded" and call1["window"] == 272000
    # The recorded policy (bytes 4000) was used although the model is tokens-mode.
    assert trace["dispatch"][0]["policy_source"] == "recorded"
    predicted = _simulate(path, "codex")
    assert [e["kind"] for e in predicted["compactions"]] == ["recorded_not_predicted"] * 2


def _event(eid: int, **fields: Any) -> dict[str, Any]:
    return {"id": eid, "timestamp": "2026-03-01T10:00:00", "source": "agent", **fields}


TRAJECTORY = [
    _event(0, action="system", args={"content": "S"}),
    _event(1, source="user", action="message", args={"content": "task"}),
    _event(2, action="run", args={"command": "ls", "thought": "t1"},
           tool_call_metadata={"tool_call_id": "c1", "function_name": "execute_bash",
                               "model_response": {"id": "r1"}}),
    _event(3, observation="run", cause=2, content="out1"),
    _event(4, action="run", args={"command": "ls"},
           tool_call_metadata={"tool_call_id": "c2", "model_response": {"id": "r2"}}),
    _event(5, observation="run", cause=4, content="out2"),
    _event(6, action="condensation", args={"forgotten_events_start_id": 2,
                                           "forgotten_events_end_id": 3,
                                           "summary": "ran ls once", "summary_offset": 1}),
    _event(7, action="run", args={"command": "ls"},
           tool_call_metadata={"tool_call_id": "c3", "model_response": {"id": "r3"}}),
    _event(8, observation="run", cause=7, content="out3"),
    _event(9, action="condensation_request", args={}),
    _event(10, action="message", args={"content": "done"}),
]


def _openhands(tmp_path: Path):
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(TRAJECTORY))
    (session,) = load(path).sessions
    return path, session


def test_openhands_keeps_condensations_on_the_next_message(tmp_path: Path) -> None:
    _, session = _openhands(tmp_path)
    marked = [m for m in session.messages if "openhands_condensation" in m.meta]
    assert len(marked) == 1 and [c.id for c in marked[0].tool_calls] == ["c3"]
    assert marked[0].meta["openhands_condensation"] == {
        "forgotten_events_start_id": 2, "forgotten_events_end_id": 3,
        "summary": "ran ls once", "summary_offset": 1}
    requested = [m for m in session.messages if m.meta.get("openhands_condensation_request")]
    assert [m.text for m in requested] == ["done"]
    assert marked[0].meta["call_event_ids"] == [7]
    assert [m.meta["event_id"] for m in session.messages if m.role == "tool"] == [3, 5, 8]
    # Condensation actions are neither messages nor calls.
    assert session.tool_call_count == 3 and session.tool_result_count == 3
    assert [e["source"] for e in session.meta["recorded_compactions"]] == ["openhands"]


def test_openhands_recorded_mode_forgets_the_recorded_events(tmp_path: Path) -> None:
    path, _ = _openhands(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"openhands_mode": "recorded"}))
    assert main([str(path), "--profile", "openhands", "--config", str(config)], out, err) == 0
    trace = json.loads(out.getvalue())
    # The condensation marks m6, the response of call 2 (two assistant messages before it):
    # call 2 could not see it, call 3 replays it — events 2 and 3 (m2's call and its result)
    # forgotten, the recorded summary at offset 1 — and the trace attributes it to call 2.
    assert trace["calls"][2]["openhands_condenser"]["forgotten_total"] == 0
    report = trace["calls"][3]["openhands_condenser"]
    assert report["forgotten_total"] == 2
    sent = [m["content"] for m in report["history"]]
    assert sent[:3] == ["S", "task", "\n\nran ls once"]
    assert [(e["call_index"], e["kind"]) for e in trace["compactions"]] == [(2, "recorded")]
