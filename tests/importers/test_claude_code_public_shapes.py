"""Claude Code files as public 2.0.76–2.1.x sessions write them (583 sessions committed by a
session-archiving tool, read in place): records glued onto one line, parents the file never
holds, zero-usage stand-in replies, and a result typed over while parallel calls ran. Each
test is a small hand-made file of that shape."""

from __future__ import annotations

import io
import json

from ctxsim.importers import load

SESSION = "5e0c1c7a-0000-4000-8000-000000000001"


def _record(uuid: str, parent: str | None, kind: str, content, **extra) -> dict:
    message: dict = {"role": kind, "content": content}
    if kind == "assistant":
        message.update(id=extra.pop("msg_id", f"msg_{uuid}"), type="message",
                       model=extra.pop("model", "claude-opus-4-5-20251101"),
                       usage=extra.pop("usage", {"input_tokens": 5,
                                                 "cache_read_input_tokens": 20_000,
                                                 "cache_creation_input_tokens": 100,
                                                 "output_tokens": 30}))
    return {"parentUuid": parent, "isSidechain": False, "type": kind, "uuid": uuid,
            "sessionId": SESSION, "version": "2.1.29",
            "timestamp": "2026-01-20T10:00:00.000Z", "message": message, **extra}


def _call(call_id: str) -> list[dict]:
    return [{"type": "tool_use", "id": call_id, "name": "Bash", "input": {"command": "ls"}}]


def _result(call_id: str, text: str = "a.py") -> list[dict]:
    return [{"type": "tool_result", "tool_use_id": call_id, "content": text}]


def _load(lines: list[str]):
    return load(io.BytesIO(("\n".join(lines) + "\n").encode()))


def _jsonl(records: list[dict]) -> list[str]:
    return [json.dumps(r) for r in records]


def test_two_records_written_on_one_line_are_both_read():
    records = [_record("u1", None, "user", "list the files"),
               _record("a1", "u1", "assistant", [{"type": "text", "text": "Done."}])]
    summary = {"type": "summary", "summary": "Listing files", "leafUuid": "a1"}
    lines = _jsonl(records)
    lines[-1] += json.dumps(summary)  # Claude Code left out the line break
    result = _load(lines + _jsonl([_record("u2", "a1", "user", "thanks"),
                                   _record("a2", "u2", "assistant",
                                           [{"type": "text", "text": "You're welcome."}])]))
    (session,) = result.sessions
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant"]
    assert any("written together without a line break" in w for w in result.warnings)


def test_a_synthetic_reply_is_no_billed_call():
    zero = {"input_tokens": 0, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0,
            "output_tokens": 0}
    (session,) = _load(_jsonl([
        _record("u1", None, "user", "go"),
        _record("a1", "u1", "assistant", [{"type": "text", "text": "No response requested."}],
                model="<synthetic>", usage=zero),
        _record("u2", "a1", "user", "go on"),
        _record("a2", "u2", "assistant", [{"type": "text", "text": "Working."}]),
    ])).sessions
    synthetic, real = [m for m in session.messages if m.role == "assistant"]
    assert "recorded" not in synthetic.meta
    assert real.meta["recorded"]["total_input"] == 20_105


def test_a_parent_the_file_never_holds_continues_the_record_written_before_it():
    """A Stop hook's `progress` line names a parent the file does not hold, and a
    compact_boundary's `logicalParentUuid` is missing too: the history before each stays."""
    records = [
        _record("u1", None, "user", "fix the build"),
        _record("a1", "u1", "assistant", _call("t1")),
        _record("r1", "a1", "user", _result("t1")),
        _record("a2", "r1", "assistant", [{"type": "text", "text": "Fixed."}]),
        {"parentUuid": "never-written", "isSidechain": False, "type": "progress",
         "uuid": "p1", "sessionId": SESSION, "data": {"type": "hook_progress",
                                                      "hookEvent": "Stop"}},
        _record("u2", "p1", "user", "now the tests"),
        _record("a3", "u2", "assistant", _call("t2")),
        _record("r2", "a3", "user", _result("t2")),
        {"parentUuid": None, "logicalParentUuid": "also-never-written", "isSidechain": False,
         "type": "system", "subtype": "compact_boundary", "uuid": "b1", "sessionId": SESSION,
         "content": "Conversation compacted",
         "compactMetadata": {"trigger": "auto", "preTokens": 155_300}},
        _record("s1", "b1", "user", "This session is being continued from a previous "
                "conversation.", isCompactSummary=True),
        _record("a4", "s1", "assistant", [{"type": "text", "text": "Continuing."}]),
    ]
    result = _load(_jsonl(records))
    (session,) = result.sessions
    assert [m.text for m in session.messages if m.role == "user"][:2] == [
        "fix the build", "now the tests"]
    assert [c.id for m in session.messages for c in m.tool_calls] == ["t1", "t2"]
    assert session.messages[-2].meta["compaction"]["pre_tokens"] == 155_300
    assert not any("abandoned branches" in w for w in result.warnings)


def test_a_result_typed_over_on_a_side_branch_keeps_the_result_and_the_text():
    """2.1 parallel calls: each result hangs off its own tool_use line; one of them also
    carries what the user typed meanwhile."""
    records = [
        _record("u1", None, "user", "check both"),
        _record("a1", "u1", "assistant", _call("t1"), msg_id="msg_par"),
        _record("a1b", "a1", "assistant", _call("t2"), msg_id="msg_par"),
        _record("r1", "a1", "user", [*_result("t1", "one"),
                                     {"type": "text", "text": "also look at b.py"}]),
        _record("r2", "a1b", "user", _result("t2", "two")),
        _record("a2", "r2", "assistant", [{"type": "text", "text": "Both fine."}]),
    ]
    (session,) = _load(_jsonl(records)).sessions
    assert {m.tool_call_id: m.text for m in session.messages if m.role == "tool"} == {
        "t1": "one", "t2": "two"}
    assert "also look at b.py" in [m.text for m in session.messages if m.role == "user"]
