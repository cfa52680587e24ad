"""Codex CLI rollouts from before 0.40: a bare meta line, then bare Responses items.

Line 1 is `{id, timestamp, instructions, git}` with no `type`; `{"record_type":"state"}`
lines are bookkeeping. There are no per-line timestamps and no usage.

The earliest rollouts (`rollout-<date>-<id>.json`, spring 2025) are one JSON document with
the same two parts: `{"session": {timestamp, id, instructions}, "items": [Responses items]}`.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session

from .codex import instructions_text
from .common import HistoryBuilder, require_sessions, title_from
from .errors import TranscriptError, type_name
from .responses_items import ITEM_TYPES, ItemMapper
from .source import Probe, Source

NAME = "codex-legacy"


def _json_layout(document: Any) -> bool:
    return (
        isinstance(document, dict)
        and isinstance(document.get("session"), dict)
        and isinstance(document.get("items"), list)
    )


def detect(probe: Probe) -> bool | str:
    if not probe.is_jsonl and _json_layout(probe.document()):
        return True
    if not probe.records:
        return "not JSON Lines"
    first = probe.first_record
    if not (isinstance(first, dict) and "id" in first and "type" not in first
            and "payload" not in first and ("instructions" in first or "timestamp" in first)):
        return "line 1 is not a bare {id, timestamp, instructions} meta object"
    for record in probe.records[1:]:
        if isinstance(record, dict) and (
            record.get("record_type") == "state" or record.get("type") in ITEM_TYPES
        ):
            return True
    if len(probe.records) == 1 and "instructions" in first:
        return True
    return "no {\"record_type\":\"state\"} line or bare Responses item after the meta line"


def _document(source: Source) -> dict[str, Any] | None:
    """The JSON layout's document, or None for JSON Lines."""
    probe = Probe(source)
    if probe.is_jsonl:
        return None
    document = probe.document()
    return document if _json_layout(document) else None


def _add_instructions(history: HistoryBuilder, meta: dict[str, Any], line: int | None) -> None:
    text = instructions_text(meta)
    if text:
        history.add(Message.of(
            "system", text, meta={"source_line": line, "source": "instructions"}
        ))


def parse(source: Source) -> list[Session]:
    history = HistoryBuilder()
    mapper = ItemMapper(history)
    meta: dict[str, Any] = {}
    document = _document(source)
    if document is not None:
        meta = document["session"]
        _add_instructions(history, meta, None)
        for index, item in enumerate(document["items"]):
            mapper.add(item, {"item_index": index}, None, f"items[{index}]")
    else:
        for line, record in source.records():
            if not isinstance(record, dict):
                raise TranscriptError(
                    f"each rollout line should be a JSON object, not {type_name(record)}",
                    line=line,
                )
            if not meta and "type" not in record and "record_type" not in record:
                meta = record
                _add_instructions(history, meta, line)
                continue
            if "record_type" in record:
                continue
            mapper.add(record, {"source_line": line}, line)
    messages = history.messages()
    if not messages:
        require_sessions([], "the rollout has no conversation items")
    session_meta: dict[str, Any] = {key: meta[key] for key in ("id", "git") if key in meta}
    if isinstance(meta.get("timestamp"), str):
        session_meta["started"] = meta["timestamp"]
    human = next(
        (m for m in messages if m.role == "user" and not m.meta.get("injected")), None
    )
    return [Session(
        format=NAME,
        title=title_from([human] if human else [], "Codex session"),
        messages=messages,
        key=str(meta.get("id", "")),
        meta=session_meta,
    )]
