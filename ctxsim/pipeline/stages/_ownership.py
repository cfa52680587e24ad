"""Which assistant message a tool result belongs to (SPEC §2.3): the nearest earlier assistant
message that issued its id, wherever the result sits; None when no call has the id."""

from __future__ import annotations

from collections.abc import Sequence

from ..messages import Message


def result_owners(history: Sequence[Message]) -> dict[int, int | None]:
    """Map each tool message's index to its owning assistant's index (or None)."""
    latest: dict[str, int] = {}
    owners: dict[int, int | None] = {}
    for i, m in enumerate(history):
        if m.role == "assistant":
            for c in m.tool_calls:
                latest[c.id] = i
        elif m.role == "tool":
            owners[i] = latest.get(m.tool_call_id)
    return owners
