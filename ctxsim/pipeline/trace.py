"""Trace rendering (reference/chatcli/README.md): the JSON record of a replay.

Message objects omit keys with empty/false values except `role` and `content`; content that is
not valid UTF-8 is rendered Go's way (one U+FFFD per invalid byte) with the exact bytes in
`content_b64`.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from .agents_common import COMPACTION_EVENTS, merge_compactions, recorded_compactions
from .calibration import Calibration, calibrate
from .messages import Message, decode_for_display, is_valid_utf8
from .replay import CallResult, Replay
from .spill import SpillRecord
from .token_model import TokenModel, call_figures
from .usage import NEXT_CALL_LABEL, call_recorded, guess_provider

# `build_trace(calibration=AUTO)`: calibrate the replay's own messages.
AUTO: Any = object()


def _content(data: bytes, out: dict[str, Any]) -> None:
    out["content"] = decode_for_display(data)
    if not is_valid_utf8(data):
        out["content_b64"] = base64.b64encode(data).decode("ascii")


def message_json(m: Message) -> dict[str, Any]:
    """One message as the trace shows it."""
    out: dict[str, Any] = {"role": m.role}
    _content(m.content, out)
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": c.type or "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.is_error:
        out["is_error"] = True
    if m.error_code:
        out["error_code"] = m.error_code
    if m.agent_feedback:
        out["agent_feedback"] = True
    return out


def history_json(history: Iterable[Message]) -> list[dict[str, Any]]:
    return [message_json(m) for m in history]


def spill_json(s: SpillRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": s.name,
        "path": s.path,
        "created_in_call": s.created_in_call,
        "size": s.size,
    }
    _content(s.content, out)
    return out


def call_json(call: CallResult, summary: bool = False, *, recorded: Any = None,
              calibration: Calibration | None = None,
              token_model: TokenModel | None = None) -> dict[str, Any]:
    """One call: position, one key per stage (report + `history` unless summary), tokens,
    the provider's recorded usage and the calibrated estimates (SPEC §11)."""
    out: dict[str, Any] = {
        "call_index": call.call_index,
        "run_index": call.run_index,
        "loop_turn": call.loop_turn,
        "response_input_index": call.response_input_index,
    }
    if call.response_input_index is None:
        out["label"] = NEXT_CALL_LABEL
    for run in call.stages:
        report = dict(run.report)
        if not summary:
            report["history"] = history_json(run.history)
        out[run.stage] = report
    out["tokens"] = {
        "raw": call.raw_tokens,
        "sent": call.sent_tokens,
        "saved_by_stage": call.savings,
        "carried_over": call.carried_over,
        "calibrated_raw": calibration.value(call.raw_tokens) if calibration else None,
        "calibrated_sent": calibration.value(call.sent_tokens) if calibration else None,
        **call_figures(token_model, call),
    }
    out["recorded"] = recorded
    out["error"] = call.error
    return out


def replay_calibration(rep: Replay, provider: str | None = None) -> Calibration | None:
    """The calibration of a replay's transcript for the replay's counter and image rule."""
    return calibrate(rep.messages, rep.counter, image_rule=rep.image_rule, tools=rep.tools,
                     response_schema=rep.response_schema,
                     provider=provider or (rep.session or {}).get("provider")
                     or guess_provider(rep.messages))


def build_trace(rep: Replay, summary: bool = False, *, calibration: Any = AUTO,
                provider: str | None = None) -> dict[str, Any]:
    """Run the replay to the end and render the whole trace (SPEC §6, §11).

    `calibration` is the session's (e.g. stored with its summary); by default it is computed
    from the replay's messages, once. Invariant: calls are rendered as they are produced, so
    only the JSON (not every call's message tuples) is kept.
    """
    calls: list[dict[str, Any]] = []
    trace = _render(rep, summary, calls.append, calibration=calibration, provider=provider)
    trace["calls"] = calls
    return {k: list(v) if isinstance(v, _Items) else v for k, v in trace.items()}


class _Items:
    """A list of the trace rendered item by item when it is written (`write_trace`): the
    final history of a long session is every message it holds (tens of MB of text), and
    rendering it whole, then as one JSON string, doubled the download's peak memory."""

    def __init__(self, render: Any, items: Iterable[Any]) -> None:
        self.render = render
        self.items = items

    def __iter__(self) -> Iterator[Any]:
        return (self.render(item) for item in self.items)


def _render(rep: Replay, summary: bool, on_call: Any, *, calibration: Any = AUTO,
            provider: str | None = None) -> dict[str, Any]:
    """The trace with each call's JSON handed to `on_call` as it is made, in order; its
    "calls" entry is left for the caller (`build_trace` keeps a list, `write_trace` a file)."""
    if calibration is AUTO:
        calibration = replay_calibration(rep, provider)
    compactions: list[dict[str, Any]] = []
    peak = total = 0
    for call in rep.calls():
        billed = call_recorded(rep.messages, call.response_input_index)
        on_call(call_json(call, summary, recorded=billed, calibration=calibration,
                          token_model=rep.token_model))
        compactions += call_compactions(call)
        peak = max(peak, call.sent_tokens)
        total += call.sent_tokens
    trace: dict[str, Any] = {
        "effective_config": rep.config.effective_config(),
        "dispatch": rep.dispatch,
        "calls": None,
        "final_history": _Items(message_json, rep.final_history),
        "spilled_files": _Items(spill_json, rep.spilled_files),
        "calibration": calibration.as_json() if calibration else None,
        "token_model": rep.token_model.as_json() if rep.token_model else None,
        "tokens": {"counter": rep.counter.name, "peak_sent": peak, "total_sent": total},
    }
    # SPEC-agents §2.5.0.7: only traces of the agent stages carry the compaction lists.
    recorded = recorded_compactions(rep.messages)
    if compactions or recorded:
        trace["compactions"] = merge_compactions(compactions)
        trace["recorded_compactions"] = recorded
    return trace


def call_compactions(call: CallResult) -> list[dict[str, Any]]:
    """The compactions the call's stages applied or predicted (SPEC-agents §2.5.0.7)."""
    return [{"stage": e["stage"], "call_index": e.get("call_index", call.call_index),
             **{k: v for k, v in e.items() if k not in ("stage", "call_index")}}
            for run in call.stages for e in run.report.get(COMPACTION_EVENTS, ())]


def write_trace(rep: Replay, out: BinaryIO, summary: bool = False, *,
                calibration: Any = AUTO, provider: str | None = None) -> None:
    """Write `json.dumps(build_trace(rep, summary, ...), ensure_ascii=False)`, UTF-8, to `out`.

    Invariant: the bytes are exactly those of `build_trace`'s JSON (both render through
    `_render`), but at most one call's JSON is in memory at a time: the calls are spooled to
    a temporary file as they are made, since keys before "calls" are known only at the end;
    the other lists (final history, spilled files, dispatch reports) are written item by item
    (`json.dumps` of a list is its items' joined by ", " in brackets).
    """
    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")

    with tempfile.TemporaryFile() as calls:
        def spool(call: dict[str, Any]) -> None:
            calls.write((b", " if calls.tell() else b"") + dumps(call))

        trace = _render(rep, summary, spool, calibration=calibration, provider=provider)
        for n, (key, value) in enumerate(trace.items()):
            out.write((b", " if n else b"{") + dumps(key) + b": ")
            if key == "calls":
                out.write(b"[")
                calls.seek(0)
                shutil.copyfileobj(calls, out)
                out.write(b"]")
            elif isinstance(value, (list, _Items)):
                out.write(b"[")
                for i, item in enumerate(value):
                    out.write((b", " if i else b"") + dumps(item))
                out.write(b"]")
            else:
                out.write(dumps(value))
        out.write(b"}")
