"""Recorded compactions kept by the importers (SPEC-agents §2.5.0.5), for Codex and OpenHands.

ctxsim cannot call a model, so a compaction's summary is known only where the transcript
recorded it; the replay stages read these markers from message `meta`, and the session keeps
the list of them (`meta.recorded_compactions`) so a page can mark the calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ctxsim.pipeline.agents_common import recorded_compactions
from ctxsim.pipeline.messages import Message

# `meta` keys of a nested message (a Codex replacement history) that the stages read.
NESTED_META = ("kind", "binary_parts")


def message_dict(m: Message) -> dict[str, Any]:
    """A canonical message as a JSON object of the scenario shape (SPEC §6)."""
    out: dict[str, Any] = {"role": m.role, "content": m.text}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "type": c.type or "function",
                              "function": {"name": c.name, "arguments": c.arguments}}
                             for c in m.tool_calls]
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    if m.is_error:
        out["is_error"] = True
    meta = {k: m.meta[k] for k in NESTED_META if k in m.meta}
    if meta:
        out["meta"] = meta
    return out


def _with_meta(m: Message, **extra: Any) -> Message:
    return replace(m, meta={**m.meta, **extra})


def mark_next(messages: Sequence[Message], positions: Iterable[int], key: str,
              where: str, value: Any) -> tuple[Message, ...]:
    """Give `meta[key] = value` to the first message whose `meta[where]` (its source line or
    event index) comes after each position; a message already marked keeps its marker."""
    out = list(messages)
    for pos in positions:
        for i, m in enumerate(out):
            at = m.meta.get(where)
            if isinstance(at, int) and at > pos:
                if key not in m.meta:
                    out[i] = _with_meta(m, **{key: value})
                break
    return tuple(out)


def codex_markers(messages: Sequence[Message], boundary_lines: Iterable[int],
                  compacted_events: set[int]) -> tuple[Message, ...]:
    """A `context_compacted` event with no `compacted` line since the previous one marks the
    next message `boundary_only`; one that follows a `compacted` line flags that message."""
    out = tuple(_with_meta(m, context_compacted_event=True) if id(m) in compacted_events else m
                for m in messages)
    return mark_next(out, boundary_lines, "compaction", "source_line",
                     {"source": "codex", "kind": "boundary_only"})


def with_recorded_compactions(meta: Mapping[str, Any], messages: Sequence[Message]
                              ) -> dict[str, Any]:
    """Session meta plus `recorded_compactions` (file order) when the transcript has any."""
    entries = [{k: v for k, v in e.items() if k != "call_index"}
               for e in recorded_compactions(messages)]
    out = dict(meta)
    if entries:
        out["recorded_compactions"] = entries
    return out
