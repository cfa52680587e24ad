"""A call's recorded request beside what the replayed profile sends (SPEC §12).

Sessions of format `claude-code-requests` keep, per model call, what Claude Code really sent
(`meta["recorded_requests"]`, one entry per call in order). When that request is exactly the
transcript's history up to the call (`matches_history`), it is the raw history the replay
starts from, so comparing the sent messages with the raw ones, position by position, marks
the first message where the simulated profile departs from what was sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxsim.pipeline.replay import CallResult


def _same(sent, raw, position: int) -> bool:
    return (sent.origin == position and sent.role == raw.role and sent.content == raw.content
            and sent.tool_calls == raw.tool_calls and sent.tool_call_id == raw.tool_call_id)


def compare(meta: Mapping[str, Any] | None, call: CallResult, index: int) -> dict | None:
    """What the call view shows about call `index`'s recorded request, or None without one."""
    recorded = (meta or {}).get("recorded_requests")
    if not isinstance(recorded, list) or not 0 <= index < len(recorded):
        return None
    entry = recorded[index] if isinstance(recorded[index], dict) else {}
    result: dict[str, Any] = {
        "file": str(entry.get("request_file", "")),
        "messages": entry.get("messages"),
        "model": entry.get("model"),
        "matches_history": bool(entry.get("matches_history")),
        "sent": len(call.sent),
        "first_difference": None,
        "difference": "",
    }
    if not result["matches_history"]:
        return result
    raw = call.raw_history
    for position in range(max(len(raw), len(call.sent))):
        if position >= len(call.sent):
            result["difference"] = "not sent by this profile"
        elif position >= len(raw):
            result["difference"] = "added by this profile"
        elif not _same(call.sent[position], raw[position], position):
            sent = call.sent[position]
            result["difference"] = ("rewritten by this profile" if sent.origin == position
                                    else "not in the recorded request at this position")
        else:
            continue
        result["first_difference"] = position
        break
    return result
