"""Moving sessions between the pure model (`ctxsim.pipeline.messages`) and the database.

`save_sessions` writes everything one file yielded inside the caller's transaction, so a failed
file leaves no rows; `load_session` rebuilds the canonical session, each message carrying its
position as `origin` so replays can align what was sent with what the transcript holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ctxsim.pipeline import messages as pm
from ctxsim.transcripts.models import Content, Message, Session
from ctxsim.transcripts.search import index_sessions
from ctxsim.transcripts.sql import insert_rows, values_in

MESSAGE_FIELDS = ("session", "index", "role", "content", "name", "tool_calls", "tool_call_id",
                  "is_error", "error_code", "agent_feedback", "meta")


# `\u0000` in serialized JSON is a NUL only after an even number of backslashes.
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def json_safe(value: Any) -> Any:
    """A JSON value PostgreSQL's jsonb accepts: no NUL characters, no lone surrogates.

    Transcripts are untrusted and JSON may legally carry both; they become U+FFFD here (message
    contents are stored as exact bytes elsewhere and keep them).
    """
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
        clean = _ESCAPED_NUL.search(text) is None
    except UnicodeEncodeError:
        clean = False
    if clean:
        return value
    # Cleaned value by value: replacing inside the serialized text also hit the six characters
    # `\u0000` of an escaped backslash, leaving invalid JSON (issue 20 item 16).
    return _walk_safe(value)


def _walk_safe(value: Any) -> Any:
    if isinstance(value, str):
        return _text_safe(value)
    if isinstance(value, dict):
        return {_walk_safe(k) if isinstance(k, str) else k: _walk_safe(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk_safe(v) for v in value]
    return value


def _text_safe(value: str) -> str:
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    return value.encode("utf-8", "replace").decode("utf-8")


def store_contents(blobs: Iterable[bytes]) -> dict[str, int]:
    """Store each distinct content once; returns sha256 → Content id for all of them.

    Three queries however many contents: the ids already stored, one INSERT of the others (a
    concurrent import may have stored some: skipped), their ids."""
    by_hash: dict[str, bytes] = {}
    for blob in blobs:
        by_hash.setdefault(hashlib.sha256(blob).hexdigest(), blob)
    ids = _content_ids(list(by_hash))
    missing = [h for h in by_hash if h not in ids]
    if missing:
        insert_rows(Content, ("sha256", "size", "data", "token_counts"),
                    [(h, len(by_hash[h]), by_hash[h], {}) for h in missing],
                    ignore_conflicts=True, prepare=True)
        ids.update(_content_ids(missing))
    return ids


def _content_ids(hashes: Sequence[str]) -> dict[str, int]:
    if not hashes:
        return {}
    return dict(Content.objects.filter(sha256__in=values_in(hashes)).values_list("sha256", "id"))


def model_call_count(messages: Sequence[pm.Message]) -> int:
    """SPEC §1: one call per assistant message, plus a trailing call unless the transcript ends
    with an assistant message without tool calls."""
    assistants = sum(1 for m in messages if m.role == "assistant")
    last = messages[-1] if messages else None
    ends_with_answer = last is not None and last.role == "assistant" and not last.tool_calls
    return assistants if ends_with_answer else assistants + 1


def parse_timestamp(raw: object) -> datetime | None:
    """An ISO-8601 timestamp from a transcript; naive ones are taken as UTC."""
    if not isinstance(raw, str):
        return None
    try:
        parsed = parse_datetime(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def _timestamps(messages: Sequence[pm.Message]) -> tuple[datetime | None, datetime | None]:
    stamps = [t for m in messages if (t := parse_timestamp(m.meta.get("timestamp")))]
    return (min(stamps), max(stamps)) if stamps else (None, None)


def _session_time(meta: dict, key: str, fallback: datetime | None) -> datetime | None:
    return parse_timestamp(meta.get(key)) or fallback


# The agent a format's transcripts come from, for a session's origin when the upload names none.
AGENT_OF_FORMAT = {"claude-code": "claude-code", "claude-code-requests": "claude-code",
                   "codex": "codex", "codex-legacy": "codex", "openhands": "openhands",
                   "openhands-eval": "openhands", "swe-agent": "swe-agent", "chatcli": "chatcli"}
ORIGIN_FIELDS = {"host": 255, "cwd": 1000, "agent": 40, "agent_version": 40}


def session_origin(session: pm.Session, given: Mapping[str, str] | None) -> dict[str, str]:
    """host, cwd, agent and agent_version of a session: what the upload said, else what the
    transcript records (Claude Code's `cwd` and `version`, Codex's `cwd` and `cli_version`)."""
    meta = session.meta or {}
    found = {
        "host": "",
        "cwd": meta.get("cwd"),
        "agent": AGENT_OF_FORMAT.get(session.format, ""),
        "agent_version": meta.get("version") or meta.get("cli_version"),
    }
    origin = {}
    for name, limit in ORIGIN_FIELDS.items():
        value = (given or {}).get(name) or found[name]
        origin[name] = _text_safe(value.strip())[:limit] if isinstance(value, str) else ""
    return origin


def link_subagents(rows: Sequence[Session]) -> None:
    """Link sessions stored from different files (issue 27): a sidechain whose parent its file
    did not hold goes under the team's newest top-level session of that key, and a new
    top-level session adopts the team's orphans that name it."""
    ids = [row.pk for row in rows]
    for row in rows:
        if row.parent_id is None and row.parent_key:
            parent = (Session.objects.filter(team_id=row.team_id, source_key=row.parent_key,
                                             parent__isnull=True)
                      .exclude(pk__in=ids).order_by("-pk").first())
            if parent is not None:
                row.parent = parent
                row.save(update_fields=["parent"])
    for row in rows:
        if row.parent_id is None and row.source_key:
            (Session.objects.filter(team_id=row.team_id, parent__isnull=True,
                                    parent_key=row.source_key)
             .exclude(pk__in=ids).update(parent=row))


def save_sessions(
    sessions: Sequence[pm.Session], *, team, user=None, source_name: str = "",
    in_transaction: Callable[[list[Session]], None] | None = None,
    source_sha256: str = "", origin: Mapping[str, str] | None = None,
) -> list[Session]:
    """Write the sessions of one file (sidechains linked to their parents, also to a parent
    stored from another file: `link_subagents`); all or nothing. `origin` is what the upload
    said of where it came from (`session_origin`). `in_transaction(rows)` runs inside the
    same transaction, last (raising rolls it back)."""
    keys = {s.key for s in sessions}
    with transaction.atomic():
        content_ids = store_contents(m.content for s in sessions for m in s.messages)
        stored: dict[str, Session] = {}
        rows: dict[int, Session] = {}
        pending = list(sessions)
        while pending:
            # Parents before their sidechains (which may nest); a parent the file does not
            # hold leaves the sidechain as a top-level session.
            ready = [
                s for s in pending
                if s.parent_key is None or s.parent_key in stored or s.parent_key not in keys
            ] or pending
            for session in ready:
                row = _save_one(session, team, user, source_name, content_ids, stored,
                                source_sha256, origin)
                stored.setdefault(session.key, row)
                rows[id(session)] = row
            pending = [s for s in pending if id(s) not in rows]
        saved = [rows[id(s)] for s in sessions]
        link_subagents(saved)
        index_sessions(saved)
        if in_transaction is not None:
            in_transaction(saved)
        return saved


def _save_one(session, team, user, source_name, content_ids, stored,
              source_sha256: str = "", origin: Mapping[str, str] | None = None) -> Session:
    messages = session.messages
    meta = json_safe(dict(session.meta))
    started, ended = _timestamps(messages)
    where = session_origin(session, origin)
    row = Session.objects.create(
        origin_host=where["host"], origin_cwd=where["cwd"], origin_agent=where["agent"],
        origin_agent_version=where["agent_version"],
        parent_key=_text_safe(session.parent_key or "")[:200],
        team=team,
        title=_text_safe(session.title or source_name or "Untitled session")[:300],
        format=session.format,
        source_name=_text_safe(source_name)[:500],
        source_key=_text_safe(session.key)[:200],
        source_sha256=source_sha256,
        uploaded_by=user,
        parent=stored.get(session.parent_key) if session.parent_key is not None else None,
        tools=json_safe(session.tools) if session.tools is not None else None,
        response_schema=(
            json_safe(session.response_schema) if session.response_schema is not None else None
        ),
        meta=meta,
        warnings=[_text_safe(w) for w in session.warnings],
        started_at=_session_time(meta, "started_at", started),
        ended_at=_session_time(meta, "ended_at", ended),
        message_count=len(messages),
        model_call_count=model_call_count(messages),
        tool_call_count=session.tool_call_count,
        tool_result_count=session.tool_result_count,
        error_result_count=sum(1 for m in messages if m.role == "tool" and m.is_error),
        total_bytes=sum(len(m.content) for m in messages),
    )
    # One executemany for every message (bulk_create splits them by the parameter limit).
    insert_rows(Message, MESSAGE_FIELDS, [
        (
            row.pk, index, m.role, content_ids[hashlib.sha256(m.content).hexdigest()],
            _text_safe(m.name),
            json_safe([{"id": c.id, "type": c.type, "name": c.name, "arguments": c.arguments}
                       for c in m.tool_calls]),
            _text_safe(m.tool_call_id), m.is_error, _text_safe(m.error_code),
            m.agent_feedback, json_safe(dict(m.meta)) if m.meta else {},
        )
        for index, m in enumerate(messages)
    ], prepare=True)
    return row


def load_session(row: Session) -> pm.Session:
    """The canonical session of a stored row; message i has `origin` i."""
    messages = []
    query = (
        Message.objects.filter(session=row)
        .order_by("index")
        .values_list(
            "index", "role", "content__data", "name", "tool_calls", "tool_call_id",
            "is_error", "error_code", "agent_feedback", "meta",
        )
    )
    for index, role, data, name, calls, call_id, is_error, code, feedback, meta in query.iterator(
        chunk_size=2000
    ):
        messages.append(
            pm.Message.of(
                role,
                bytes(data),
                name=name,
                tool_calls=[
                    pm.ToolCall(
                        id=c.get("id", ""),
                        name=c.get("name", ""),
                        arguments=c.get("arguments", ""),
                        type=c.get("type") or "function",
                    )
                    for c in calls
                ],
                tool_call_id=call_id,
                is_error=is_error,
                error_code=code,
                agent_feedback=feedback,
                meta=meta or {},
                origin=index,
            )
        )
    return pm.Session(
        format=row.format,
        title=row.title,
        messages=tuple(messages),
        tools=row.tools,
        response_schema=row.response_schema,
        key=row.source_key,
        parent_key=None,
        meta=row.meta or {},
        warnings=tuple(row.warnings or ()),
    )
