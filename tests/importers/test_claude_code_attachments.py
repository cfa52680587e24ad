"""Claude Code attachment records (CLI 2.1+): injected context the transcript keeps apart.

A hand-made 2.1 session reads files; one Read loads a nested `CLAUDE.md` that Claude Code
records as a `nested_memory` attachment and sends as a system reminder. The bill of that step
holds it; the history does not. The importer keeps its text on the next message, and the
token model's one-step prediction counts it (issue 25: what a call added, priced one call
ahead)."""

from __future__ import annotations

import json

from ctxsim.importers import load
from ctxsim.importers.claude_code_attachments import injected_context
from ctxsim.pipeline.calibration import INJECTED_FRAME, call_estimates
from ctxsim.pipeline.token_model import build
from ctxsim.pipeline.tokens import get_counter

COUNTER = "cl100k_base"
MEMORY_AT = 5  # the Read whose folder holds a CLAUDE.md
MEMORY = "".join(f"- Rule {i}: components under app/ use the design tokens, never raw hex.\n"
                 for i in range(180))


def _lines(bills: list[int] | None, attachments: list[dict]) -> bytes:
    """A 2.1 session of 9 Reads; `attachments` are recorded after the MEMORY_AT-th result."""
    out: list[dict] = []
    parent = None

    def add(record: dict) -> None:
        nonlocal parent
        uuid = f"u{len(out):03d}"
        out.append({"parentUuid": parent, "isSidechain": False, "sessionId": "s-att",
                    "version": "2.1.30", "cwd": "/repo", "uuid": uuid,
                    "timestamp": f"2026-11-01T10:00:{len(out):02d}.000Z", **record})
        parent = uuid

    add({"type": "user", "message": {"role": "user", "content": "tidy the app's colours"}})
    for k in range(9):
        usage = {"input_tokens": bills[k], "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0, "output_tokens": 3} if bills else {}
        add({"type": "assistant", "message": {
            "id": f"msg_{k}", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": f"toolu_{k}", "name": "Read",
                         "input": {"file_path": f"/repo/app/part{k}.tsx"}}],
            **({"usage": usage} if usage else {})}})
        body = "".join(f"{i:6d}→const colour{k}_{i} = theme.palette[{i % 7}];\n"
                       for i in range(40 + 9 * k))
        add({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": body}]}})
        if k == MEMORY_AT:
            for attachment in attachments:
                add({"type": "attachment", "attachment": attachment})
    return "\n".join(json.dumps(r) for r in out).encode() + b"\n"


NESTED = {"type": "nested_memory", "path": "/repo/app/CLAUDE.md",
          "content": {"path": "/repo/app/CLAUDE.md", "type": "Project", "content": MEMORY}}
UNPRICED = [{"type": "hook_success", "hookName": "PostToolUse:Read", "exitCode": 0},
            {"type": "plan_mode", "planFilePath": "/tmp/plan.md"}]


def _session(tmp_path, bills, attachments):
    path = tmp_path / f"s{len(list(tmp_path.iterdir()))}.jsonl"
    path.write_bytes(_lines(bills, attachments))
    (session,) = load(path).sessions
    return session


def _billed(tmp_path) -> list[int]:
    """Bills of a provider pricing 1.2 per counted token, the CLAUDE.md included."""
    counter = get_counter(COUNTER)
    plain = _session(tmp_path, None, [])
    points = call_estimates(plain.messages, counter)
    memory = counter.count(f"{NESTED['path']}\n{MEMORY}".encode()) + INJECTED_FRAME
    return [round(15_000 + 1.2 * (p.estimate + (memory if p.call_index > MEMORY_AT else 0)))
            for p in points[:9]]


def test_an_injection_rides_on_the_next_message_and_adds_no_message(tmp_path):
    bills = _billed(tmp_path)
    plain = _session(tmp_path, bills, [])
    session = _session(tmp_path, bills, [NESTED, *UNPRICED])
    assert [(m.role, m.content) for m in session.messages] == [
        (m.role, m.content) for m in plain.messages]
    carriers = [m for m in session.messages if m.meta.get("injected_context")]
    assert len(carriers) == 1
    (carrier,) = carriers
    assert carrier.role == "assistant" and carrier.meta["message_id"] == f"msg_{MEMORY_AT + 1}"
    assert carrier.meta["injected_context"] == [
        {"type": "nested_memory", "name": "/repo/app/CLAUDE.md", "text": MEMORY}]


def test_the_step_that_loaded_a_claude_md_is_predicted_one_call_ahead(tmp_path):
    bills = _billed(tmp_path)
    step = bills[MEMORY_AT + 1] - bills[MEMORY_AT]

    def error(session) -> float:
        points = call_estimates(session.messages, get_counter(COUNTER))
        model = build(points, COUNTER, "anthropic", "claude-code")
        return abs(model.predicted[MEMORY_AT + 1] - bills[MEMORY_AT + 1]) / step

    assert error(_session(tmp_path, bills, [NESTED])) < 0.02
    # Without the record the same step is mostly unexplained: what the attachment is for.
    assert error(_session(tmp_path, bills, [])) > 0.5


def test_which_attachment_payloads_reach_the_model():
    assert injected_context({"type": "nested_memory", "path": "/p/CLAUDE.md",
                             "content": {"content": "use tabs"}}) == {
        "type": "nested_memory", "name": "/p/CLAUDE.md", "text": "use tabs"}
    assert injected_context({"type": "edited_text_file", "filename": "a.ts",
                             "snippet": "1\tx"}) == {
        "type": "edited_text_file", "name": "a.ts", "text": "1\tx"}
    todo = injected_context({"type": "todo_reminder", "content": [
        {"content": "fix", "status": "pending"}]})
    assert todo is not None and json.loads(todo["text"]) == [
        {"content": "fix", "status": "pending"}]
    assert injected_context({"type": "hook_additional_context",
                             "content": ["lint: ok", "tests: 3 failed"]})["text"] == (
        "lint: ok\ntests: 3 failed")
    # Bookkeeping, fixed wording the transcript does not hold, empty or malformed payloads.
    for payload in (*UNPRICED, {"type": "todo_reminder", "content": []},
                    {"type": "nested_memory", "content": {"content": 3}}, {"type": 7}, "x"):
        assert injected_context(payload) is None
