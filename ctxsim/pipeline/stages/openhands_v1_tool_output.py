"""OpenHands V1's tool-output limits (software-agent-sdk, SPEC-agents-2 §2.2 end), dispatch.

The terminal tool cuts its observation past `MAX_CMD_OUTPUT_SIZE` (30,000 characters) in the
middle with `maybe_truncate`, naming the file the full output is saved to and the line the
cut starts at; any tool text past `DEFAULT_TEXT_CONTENT_LIMIT` (50,000) is cut the same way,
with the short notice, when the message is serialised. Measured in code points (Python).
Event logs record the terminal's observation already cut, so those pass unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ..messages import Message
from . import StageContext, StageResult
from ._agents2 import replace_last, text, truncation_activity

NOTICE = ("<response clipped><NOTE>Due to the max output limit, only part of the full "
          "response has been shown to you.</NOTE>")
PERSIST_NOTICE = ("<response clipped><NOTE>Due to the max output limit, only part of the full "
                  "response has been shown to you. The complete output has been saved to "
                  "{file_path} - you can use other tools to view the full content (truncated "
                  "part starts around line {line_num}).</NOTE>")
TEXT_LIMIT = 50_000
TERMINAL_TOOLS = frozenset({"terminal", "execute_bash", "bash"})


def maybe_truncate(content: str, limit: int, save_dir: str = "",
                   prefix: str = "output") -> str:
    """The SDK's `maybe_truncate`: head ⌈(limit − notice)/2⌉, the notice, the rest as tail."""
    if not limit or limit < 0 or len(content) <= limit:
        return content
    if len(NOTICE) >= limit:
        return NOTICE[:limit]
    available = limit - len(NOTICE)
    head = available // 2 + available % 2
    notice = NOTICE
    if save_dir:
        digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        path = str(PurePosixPath(save_dir) / f"{prefix}_output_{digest}.txt")
        notice = PERSIST_NOTICE.format(file_path=path,
                                       line_num=len(content[:head].splitlines()) + 1)
    if len(notice) >= limit:
        return notice[:limit]
    remaining = limit - len(notice)
    head = min(head, remaining)
    tail = remaining - head
    return content[:head] + notice + (content[-tail:] if tail > 0 else "")


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Cut the entering observation as the SDK would.

    Invariant: only the last message may change; within both limits it is returned as it
    is (the same object)."""
    p = ctx.params
    m = history[-1]
    tool = next((c.name for a in history if a.role == "assistant" for c in a.tool_calls
                 if c.id == m.tool_call_id), "")
    content = text(m)
    after = content
    terminal = tool in TERMINAL_TOOLS
    if terminal:
        session = ctx.session if isinstance(ctx.session, Mapping) else {}
        folder = str(p.get("openhands_v1_save_dir") or "").replace(
            "{session_id}", str(session.get("session_id") or "conversation"))
        after = maybe_truncate(after, p.get("openhands_v1_terminal_limit", 30000), folder,
                               "terminal")
    after = maybe_truncate(after, TEXT_LIMIT)
    report: dict[str, Any] = {"tool": tool, "chars_before": len(content),
                              "chars_after": len(after), "truncated": after != content}
    if after == content:
        return StageResult(history, report, ())
    return replace_last(history, after, report)


activity = truncation_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("truncated"):
        return (f"{report.get('tool') or 'tool'} output clipped: {report['chars_before']:,} → "
                f"{report['chars_after']:,} characters.")
    return f"{report.get('tool') or 'tool'} output kept ({report.get('chars_before', 0):,} chars)."


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    return ("OpenHands V1 clipped no output: no terminal output was over "
            f"{facts.value('openhands_v1_terminal_limit'):,} characters and no tool text over "
            f"{TEXT_LIMIT:,}.")
