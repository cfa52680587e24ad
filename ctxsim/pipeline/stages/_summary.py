"""Placeholder summaries (SPEC-agents §2.5.0.6) and recorded replacement histories.

ctxsim cannot call a model, so a compaction at a point the transcript recorded no summary for
gets a placeholder of a chosen size; its header says what was summarized, so a reader of the
replay never mistakes it for the agent's text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message, ToolCall
from ..tokens import TokenCounter


def placeholder_text(stage: str, items: int, tokens: int, call: int, size: int,
                     counter: TokenCounter) -> str:
    """The header, then " x" repeated the fewest times that make it cost `size` tokens."""
    head = (f"[ctxsim placeholder summary: {stage} summarized {items} items ({tokens} tokens) "
            f"at call {call}; the transcript has no summary for this point]")

    def cost(k: int) -> int:
        return counter.count((head + " x" * k).encode("utf-8"))

    lo, hi = 0, 4 * size + 4
    while lo < hi:
        mid = (lo + hi) // 2
        if cost(mid) >= size:
            hi = mid
        else:
            lo = mid + 1
    return head + " x" * lo


def _calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    for c in raw or ():
        if isinstance(c, ToolCall):
            calls.append(c)
        elif isinstance(c, Mapping):
            fn = c.get("function") if isinstance(c.get("function"), Mapping) else {}
            args = fn.get("arguments", "")
            calls.append(ToolCall(str(c.get("id", "")), str(fn.get("name", "")),
                                  args if isinstance(args, str) else "",
                                  str(c.get("type") or "function")))
    return tuple(calls)


def replacement_messages(items: Sequence[Any]) -> list[Message]:
    """Canonical messages of a recorded replacement history, kept in `meta` as message
    objects of the scenario shape (role, content, tool_calls, tool_call_id, meta)."""
    out = []
    for item in items:
        if isinstance(item, Message):
            out.append(item)
            continue
        if not isinstance(item, Mapping) or item.get("role") not in (
                "system", "user", "assistant", "tool"):
            continue
        content = item.get("content")
        meta = item.get("meta") if isinstance(item.get("meta"), Mapping) else {}
        out.append(Message.of(
            item["role"], content if isinstance(content, str) else "",
            tool_calls=_calls(item.get("tool_calls")),
            tool_call_id=str(item.get("tool_call_id") or ""),
            is_error=item.get("is_error") is True, meta=meta,
        ))
    return out
