"""What a Cline / Roo Code task's `ui_messages.json` adds to its history (see `cline_common`):
each request's recorded usage (`say: "api_req_started"`; a Roo summary message is no response
and takes none), Roo's `condense_context` figures on its summaries (`_summary_condenses`),
and Cline's `conversationHistoryDeletedRange`: each new range becomes
`meta.compaction = {"source": "cline", "kind": "truncation", "deleted_range": [start, end]}`
on the first history message written after the UI entry that first carries it (by `ts`; a
history without `ts` keeps only the last range, on the session)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ctxsim.pipeline.messages import Message

from .common import obj


def _request_usage(entry: dict[str, Any]) -> dict[str, Any] | None:
    try:
        data = json.loads(entry.get("text") or "")
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    numbers = {k: data.get(k) if isinstance(data.get(k), int) else None
               for k in ("tokensIn", "tokensOut", "cacheReads", "cacheWrites")}
    if numbers["tokensIn"] is None and numbers["tokensOut"] is None:
        return None
    fresh, reads, writes = numbers["tokensIn"] or 0, numbers["cacheReads"], numbers["cacheWrites"]
    protocol = data.get("apiProtocol")
    includes = protocol == "openai" or (protocol == "anthropic"
                                        and fresh >= (reads or 0) + (writes or 0) > 0)
    total = fresh if includes else fresh + (reads or 0) + (writes or 0)
    return {"total_input": total, "input": total - (reads or 0) - (writes or 0),
            "cache_read": reads, "cache_write": writes, "output": numbers["tokensOut"],
            "reasoning": None}


def apply_ui(messages: list[Message], ui: list[Any]) -> tuple[list[Message], dict[str, Any]]:
    requests = [(e.get("ts"), usage) for e in ui if isinstance(e, dict)
                and e.get("say") == "api_req_started" and not e.get("partial")
                and (usage := _request_usage(e)) is not None]
    condenses = [e.get("contextCondense") for e in ui if isinstance(e, dict)
                 and e.get("say") == "condense_context" and isinstance(e.get("contextCondense"),
                                                                       dict)]
    # Roo's summary is no response (before 3.30 it takes the timestamp of the first message
    # it kept, and took that response's usage).
    assistants = [i for i, m in enumerate(messages) if m.role == "assistant"
                  and not m.meta.get("compact_summary")]
    out = list(messages)
    timed = all(isinstance(out[i].meta.get("ts"), (int, float)) for i in assistants) and all(
        isinstance(ts, (int, float)) for ts, _ in requests)
    used = -1
    for k, i in enumerate(assistants):
        if timed:
            at = out[i].meta["ts"]
            later = [j for j, (ts, _) in enumerate(requests) if j > used and ts <= at]
            j = later[-1] if later else None
        else:
            j = k if k < len(requests) and len(requests) == len(assistants) else None
        if j is not None:
            used = j
            out[i] = replace(out[i], meta={**out[i].meta, "recorded": requests[j][1]})
    summaries = [i for i, m in enumerate(out) if isinstance(m.meta.get("compaction"), dict)
                 and m.meta["compaction"].get("source") == "roo-code"
                 and m.meta["compaction"].get("kind") == "summary"]
    for i, condense in _summary_condenses(out, summaries, condenses):
        marker = {**out[i].meta["compaction"], "pre_tokens": condense.get("prevContextTokens"),
                  "post_tokens": condense.get("newContextTokens")}
        out[i] = replace(out[i], meta={**out[i].meta, "compaction": marker})
    meta: dict[str, Any] = {"api_requests": len(requests)}
    ranges = [(e.get("ts"), e["conversationHistoryDeletedRange"]) for e in ui
              if isinstance(e, dict) and _is_range(e.get("conversationHistoryDeletedRange"))]
    if ranges:
        meta["deleted_range"] = ranges[-1][1]
    out = _mark_ranges(out, ranges)
    if condenses:
        meta["condense_events"] = len(condenses)
    return out, meta


def _summary_condenses(messages: list[Message], summaries: list[int], condenses: list[Any]
                       ) -> list[tuple[int, dict[str, Any]]]:
    """Each summary message with its `condense_context` entry: by `condenseId` (Roo ≥ 3.30
    keeps every summary), else from the last one back (before, a condense deleted the
    previous summary with the messages it replaced: the history holds the last ones)."""
    condenses = [obj(c) for c in condenses]
    by_id = {c["condenseId"]: c for c in condenses if isinstance(c.get("condenseId"), str)}
    pairs, rest = [], []
    for i in summaries:
        found = by_id.get(str(messages[i].meta["compaction"].get("condense_id")))
        if found is not None:
            pairs.append((i, found))
        else:
            rest.append(i)
    unmatched = [c for c in condenses if not any(c is found for _, found in pairs)]
    pairs += zip(reversed(rest), reversed(unmatched), strict=False)
    return pairs


def _is_range(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(
        isinstance(x, int) and not isinstance(x, bool) for x in value)


def _mark_ranges(messages: list[Message], ranges: list[tuple[Any, list[int]]]) -> list[Message]:
    out = list(messages)
    seen: list[int] | None = None
    for ts, value in ranges:
        if value == seen or not isinstance(ts, (int, float)):
            continue
        seen = value
        at = next((i for i, m in enumerate(out) if isinstance(m.meta.get("ts"), (int, float))
                   and m.meta["ts"] > ts and "compaction" not in m.meta), None)
        if at is not None:
            marker = {"source": "cline", "kind": "truncation", "deleted_range": list(value)}
            out[at] = replace(out[at], meta={**out[at].meta, "compaction": marker})
    return out
