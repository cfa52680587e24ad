"""Gemini CLI session files, JSONL recorder (≥ 0.39): line 1 is the metadata object
(`sessionId`, `projectHash`, no `type`), then one line per change.

Replay (the recorder's loader): a message line whose `id` was seen **replaces** that record
(the first appearance fixes its position: a `gemini` record is written once with its text and
again with its tool calls); `{"$rewindTo": id}` removes that record and every later one (an
unknown id removes all); `{"$set": {…}}` merges metadata, and with `messages` it is a
checkpoint of the whole list.

ctxsim keeps the transcript's raw history, as for Claude Code: a checkpoint never removes or
rewrites a record already seen (tool-output masking rewrites results in place; the originals
are what the masking stage starts from), and only its new records are appended. A checkpoint
whose list holds a `user` record with `<state_snapshot>` followed by the model's
acknowledgement is a **recorded compression** (SPEC-agents §2.5.0.5): the snapshot becomes a
user message with `meta.compaction = {"source": "gemini-cli", "kind": "summary",
"pre_tokens": <the last recorded input before it>, "preserved_ids": [record ids of the kept
tail], "notice": "Context compressed from …"}`, the acknowledgement an assistant message with
`meta.compaction_ack = true` (no model call answered it: it has no usage), and the kept tail is
not repeated. The recorder keeps the ids of the turns it keeps (`updateMessagesFromHistory`
maps each history turn to the record with its id, new turns such as the snapshot get new ones
[S google-gemini/gemini-cli@5411f113 packages/core/src/services/chatRecordingService.ts]);
a kept record under a new id is still recognised by its content. The `user` records of
function responses a checkpoint adds are skipped like any other (the calls hold them).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxsim.pipeline.messages import Message, Session

from .common import compact_json, expect_dict
from .errors import Near, TranscriptError, type_name
from .gemini_cli import (
    HEADLESS,
    LABEL,
    build_session,
    is_session_meta,
    map_records,
    parts_of,
    text_and_media,
)
from .recorded import with_recorded_compactions
from .source import Probe, Source

NAME = "gemini-cli-jsonl"
SNAPSHOT = "<state_snapshot>"
ACK = "Got it. Thanks for the additional context!"


def detect(probe: Probe) -> bool | str:
    if not probe.is_jsonl:
        return "not JSON Lines"
    first = probe.first_record
    if is_session_meta(first) and "type" not in first:
        return True
    if isinstance(first, dict) and "sessionId" in first and any(
            isinstance(r, dict) and ("$set" in r or r.get("type") == "gemini")
            for r in probe.records[1:]):
        return Near("the first line has `sessionId` but no `projectHash`", 2)
    if isinstance(first, dict) and first.get("type") == "init" and "session_id" in first:
        return Near(f"this is `gemini -p` output (stream-json), not a session: {HEADLESS}", 3)
    return "the first line is not the {sessionId, projectHash} metadata object"


def _text(record: dict[str, Any]) -> str:
    return text_and_media(parts_of(record.get("content"), "content"))[0]


def _fingerprint(record: dict[str, Any]) -> str:
    calls = record.get("toolCalls")
    ids = [c.get("id") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    return compact_json([record.get("type"), _text(record), ids])


class _Replay:
    def __init__(self) -> None:
        self.order: list[str] = []
        self.records: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.header: dict[str, Any] = {}
        self.notice: str | None = None

    def put(self, record: dict[str, Any], meta: dict[str, Any]) -> None:
        record_id = str(record.get("id"))
        if record_id not in self.records:
            self.order.append(record_id)
        self.records[record_id] = (record, meta)
        if record.get("type") == "info" and _text(record).startswith("Context compressed"):
            self.notice = _text(record)

    def last_input(self) -> int | None:
        """The last recorded context size (`tokens.input`) of the records still in the list."""
        for record_id in reversed(self.order):
            tokens = self.records[record_id][0].get("tokens")
            if isinstance(tokens, dict) and isinstance(tokens.get("input"), int) \
                    and tokens["input"]:
                return tokens["input"]
        return None

    def rewind(self, record_id: Any) -> None:
        cut = self.order.index(record_id) if record_id in self.order else 0
        for gone in self.order[cut:]:
            del self.records[gone]
        del self.order[cut:]

    def checkpoint(self, items: list[Any], line: int) -> None:
        known = {_fingerprint(self.records[i][0]) for i in self.order}
        items = [expect_dict(item, f"$set.messages[{n}]", line) for n, item in enumerate(items)]
        snapshot = next((n for n, item in enumerate(items) if item.get("type") == "user"
                         and SNAPSHOT in _text(item)), None)
        ack = snapshot + 1 if snapshot is not None and snapshot + 1 < len(items) and \
            items[snapshot + 1].get("type") == "gemini" and \
            _text(items[snapshot + 1]).strip() == ACK else None
        if snapshot is None or ack is None:
            for n, item in enumerate(items):  # a plain checkpoint: new records only
                if str(item.get("id")) not in self.records and _fingerprint(item) not in known:
                    self.put(item, {"source_line": line, "where": f"line {line}: messages[{n}]"})
            return
        kept = [str(item.get("id")) for item in items[ack + 1:]
                if str(item.get("id")) in self.records or _fingerprint(item) in known]
        marker = {"source": "gemini-cli", "kind": "summary", "trigger": "auto",
                  "pre_tokens": self.last_input(), "preserved_ids": kept,
                  "summary_present": True}
        if self.notice:
            marker["notice"] = self.notice
        self.notice = None
        base = {"source_line": line}
        self.put(items[snapshot], {**base, "compaction": marker, "compact_summary": True,
                                   "where": f"line {line}: messages[{snapshot}]"})
        self.put(items[ack], {**base, "compaction_ack": True,
                              "where": f"line {line}: messages[{ack}]"})
        for n, item in enumerate(items[ack + 1:], start=ack + 1):
            if str(item.get("id")) not in self.records and _fingerprint(item) not in known:
                self.put(item, {**base, "where": f"line {line}: messages[{n}]"})


def parse(source: Source) -> list[Session]:
    replay = _Replay()
    for line, record in source.records():
        if not isinstance(record, dict):
            raise TranscriptError(f"{LABEL}: each line should be a JSON object, "
                                  f"not {type_name(record)}", line=line)
        if not replay.header:
            if not is_session_meta(record):
                raise TranscriptError(f"{LABEL}: the first line should be the session's "
                                      "metadata (`sessionId`, `projectHash`)", line=line)
            replay.header = dict(record)
            continue
        if "$rewindTo" in record:
            replay.rewind(record["$rewindTo"])
        elif "$set" in record:
            update = expect_dict(record["$set"], "$set", line)
            replay.header.update({k: v for k, v in update.items() if k != "messages"})
            if "messages" in update:
                if not isinstance(update["messages"], list):
                    raise TranscriptError(f"{LABEL}: `$set.messages` should be a list, not "
                                          f"{type_name(update['messages'])}", line=line)
                replay.checkpoint(update["messages"], line)
        elif "id" in record and "type" in record:
            replay.put(record, {"source_line": line, "where": f"line {line}"})
        elif is_session_meta(record):
            replay.header.update(record)
        else:
            raise TranscriptError(f"{LABEL}: a line should be a message record (`id`, "
                                  "`type`), `$set` or `$rewindTo`", line=line)
    if not replay.header:
        raise TranscriptError(f"{LABEL}: the file has no metadata line")
    records = [replay.records[i] for i in replay.order]
    try:
        messages = map_records(records)
    except TranscriptError as error:
        raise TranscriptError(error.reason) from None
    messages = _with_kept_counts(messages)
    session = build_session(NAME, replay.header, messages)
    meta = with_recorded_compactions(session.meta, session.messages)
    return [Session(format=NAME, title=session.title, messages=session.messages,
                    key=session.key, meta=meta)]


def _with_kept_counts(messages: list[Message]) -> list[Message]:
    """Each recorded summary's `kept`: how many canonical messages right before it the
    checkpoint kept (the records of `preserved_ids`, their tool results included)."""
    out = list(messages)
    for i, m in enumerate(out):
        marker = m.meta.get("compaction")
        if not isinstance(marker, dict) or marker.get("source") != "gemini-cli":
            continue
        preserved = set(marker.get("preserved_ids") or ())
        kept = sum(1 for earlier in out[:i] if earlier.meta.get("record_id") in preserved)
        out[i] = replace(m, meta={**m.meta, "compaction": {**marker, "kept": kept}})
    return out
