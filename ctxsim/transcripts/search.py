"""Search inside contents (SPEC §13): index what a session holds, find the messages holding a
string.

`search(team, query)` returns the messages of the team's sessions whose content or tool-call
arguments contain `query` (case-insensitive, exact substring), newest sessions first, each with a
snippet and the call whose view shows the message. `index_sessions` runs inside the import's
transaction (`store.save_sessions`), so a session is searchable as soon as it exists.

Two tables map a reference to the text it indexes: `search_content` (ref = a `Content` id) and
`search_args` (ref = a `Message` id: its tool calls' arguments). Neither keeps a copy of the
text. SQLite uses a contentless FTS5 table with the trigram tokenizer (any substring of 3+
characters matches, case-insensitively), PostgreSQL a `tsvector` column with a GIN index
(`simple` configuration, phrase queries), both behind `Backend`. The index only narrows the
search down to candidates; the exact text is checked here, so an index that over-matches (a
phrase of words, a reference to a content since deleted) never shows a wrong result.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from django.db import connection

from ctxsim.pipeline.messages import decode_for_display

from .models import Content, Message, Session
from .sql import values_in

TABLES = ("search_content", "search_args")
# Text beyond this many characters of one content is not indexed (a 50 MB log is searchable in
# its first 300,000 characters; PostgreSQL also caps a tsvector at 1 MB).
INDEX_CHARS = 300_000
MIN_QUERY_CHARS = 3
INDEX_BATCH_CHARS = 32_000_000


class Backend(Protocol):
    def create(self, cursor) -> None: ...

    def drop(self, cursor) -> None: ...

    def indexed(self, cursor, table: str, refs: Sequence[int]) -> set[int]: ...

    def add(self, cursor, table: str, rows: Iterable[tuple[int, str]]) -> None: ...

    def match(self, cursor, table: str, query: str, limit: int) -> list[int]: ...


def _clean(text: str) -> str:
    # Neither database stores NUL in text; it never matters for a search.
    return text[:INDEX_CHARS].replace("\x00", " ")


def _cleaned(rows: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(ref, _clean(text)) for ref, text in rows]


class SQLiteBackend:
    def create(self, cursor) -> None:
        for table in TABLES:
            cursor.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} "
                "USING fts5(body, content='', tokenize='trigram')"
            )

    def drop(self, cursor) -> None:
        for table in TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")

    def indexed(self, cursor, table: str, refs: Sequence[int]) -> set[int]:
        # The refs travel as one JSON parameter: one query however many there are.
        cursor.execute(f"SELECT rowid FROM {table} WHERE rowid IN "
                       "(SELECT value FROM json_each(%s))", [json.dumps(list(refs))])
        return {r for (r,) in cursor.fetchall()}

    def add(self, cursor, table: str, rows: Iterable[tuple[int, str]]) -> None:
        cursor.executemany(f"INSERT INTO {table}(rowid, body) VALUES (%s, %s)",
                           _cleaned(rows))

    def match(self, cursor, table: str, query: str, limit: int) -> list[int]:
        phrase = '"' + query.replace('"', '""') + '"'
        cursor.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH %s LIMIT %s",
                       [phrase, limit])
        return [r for (r,) in cursor.fetchall()]


class PostgresBackend:
    def create(self, cursor) -> None:
        for table in TABLES:
            cursor.execute(f"CREATE TABLE IF NOT EXISTS {table} "
                           "(ref bigint PRIMARY KEY, document tsvector NOT NULL)")
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {table}_gin ON {table} "
                           "USING gin (document)")

    def drop(self, cursor) -> None:
        for table in TABLES:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")

    def indexed(self, cursor, table: str, refs: Sequence[int]) -> set[int]:
        cursor.execute(f"SELECT ref FROM {table} WHERE ref = ANY(%s)", [list(refs)])
        return {r for (r,) in cursor.fetchall()}

    def add(self, cursor, table: str, rows: Iterable[tuple[int, str]]) -> None:
        cursor.executemany(
            f"INSERT INTO {table} (ref, document) VALUES (%s, to_tsvector('simple', %s)) "
            "ON CONFLICT (ref) DO NOTHING",
            _cleaned(rows),
        )

    def match(self, cursor, table: str, query: str, limit: int) -> list[int]:
        cursor.execute(f"SELECT ref FROM {table} WHERE document @@ "
                       "phraseto_tsquery('simple', %s) LIMIT %s", [query, limit])
        return [r for (r,) in cursor.fetchall()]


def for_vendor(vendor: str) -> Backend:
    if vendor == "sqlite":
        return SQLiteBackend()
    if vendor == "postgresql":
        return PostgresBackend()
    raise NotImplementedError(f"search inside contents needs SQLite or PostgreSQL, not {vendor}")


# --- indexing and searching ------------------------------------------------------------------

MAX_QUERY_CHARS = 200
CANDIDATES = 500  # per table, before the exact check
SNIPPET_CHARS = 90


class SearchError(ValueError):
    """A query that cannot be searched (too short, too long); the message says why."""


@dataclass(frozen=True)
class Hit:
    session_id: int
    session_title: str
    message_index: int
    call_index: int
    role: str
    where: str  # "content" | "tool-call arguments"
    before: str
    match: str
    after: str


def _backend():
    return for_vendor(connection.vendor)


def _args_text(tool_calls: Sequence[dict]) -> str:
    return "\n".join(str(c.get("arguments", "")) for c in tool_calls or ())


def index_sessions(sessions: Iterable[Session]) -> None:
    """Index the contents and tool-call arguments of these sessions (what is new only)."""
    session_ids = [s.pk for s in sessions]
    if not session_ids:
        return
    backend = _backend()
    messages = Message.objects.filter(session_id__in=session_ids)
    content_ids = sorted(set(messages.values_list("content_id", flat=True)))
    with connection.cursor() as cursor:
        new = sorted(set(content_ids) - backend.indexed(cursor, "search_content", content_ids))
        # One query, read 200 rows at a time (a server-side cursor on PostgreSQL), written in
        # batches of INDEX_BATCH_CHARS: the texts of a 100 MB upload are never all in memory
        # at once, and the number of statements grows with the bytes, not the contents.
        rows = (Content.objects.filter(pk__in=values_in(new)).values_list("pk", "data")
                .iterator(chunk_size=200)) if new else ()
        batch: list[tuple[int, str]] = []
        size = 0
        for pk, data in rows:
            text = decode_for_display(bytes(data[:INDEX_CHARS * 4]))
            batch.append((pk, text))
            size += len(text)
            if size >= INDEX_BATCH_CHARS:
                backend.add(cursor, "search_content", batch)
                batch, size = [], 0
        if batch:
            backend.add(cursor, "search_content", batch)
        with_calls = list(messages.exclude(tool_calls=[]).values_list("pk", "tool_calls"))
        ids = [pk for pk, _ in with_calls]
        done = backend.indexed(cursor, "search_args", ids) if ids else set()
        backend.add(cursor, "search_args",
                    ((pk, _args_text(calls)) for pk, calls in with_calls if pk not in done))


def _checked_query(query: str) -> str:
    query = " ".join(query.split())
    if len(query) < MIN_QUERY_CHARS:
        raise SearchError(f"Type at least {MIN_QUERY_CHARS} characters to search inside contents.")
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"A search is at most {MAX_QUERY_CHARS} characters long.")
    return query


def _find(text: str, query: str) -> tuple[str, str, str] | None:
    """(before, match, after) around the first case-insensitive occurrence, or None."""
    folded = text.lower()
    # Lower-casing can change a text's length (e.g. 'İ'); then positions would not line up.
    at = folded.find(query.lower()) if len(folded) == len(text) else text.find(query)
    if at < 0:
        return None
    end = at + len(query)
    before = ("…" if at > SNIPPET_CHARS else "") + text[max(0, at - SNIPPET_CHARS):at]
    after = text[end:end + SNIPPET_CHARS] + ("…" if end + SNIPPET_CHARS < len(text) else "")
    return before, text[at:end], after


def search(team, query: str, limit: int = 50) -> list[Hit]:
    """Messages of the team's sessions that hold `query`; raises SearchError for bad queries."""
    found = _matches(team, query, limit)
    calls = _call_indexes([message for message, _, _ in found])
    return [Hit(message.session_id, message.session.title, message.index, calls[message.pk],
                message.role, where, *snippet) for message, where, snippet in found]


def _matches(team, query: str, limit: int) -> list[tuple[Message, str, tuple[str, str, str]]]:
    """(message, where, snippet) of the first `limit` messages holding `query`, newest
    sessions first; the index only proposes candidates, the exact text decides."""
    query = _checked_query(query)
    backend = _backend()
    with connection.cursor() as cursor:
        content_refs = backend.match(cursor, "search_content", query, CANDIDATES)
        args_refs = backend.match(cursor, "search_args", query, CANDIDATES)
    team_messages = Message.objects.filter(session__team=team).select_related("session")
    found: list[tuple[Message, str, tuple[str, str, str]]] = []
    texts = dict(Content.objects.filter(pk__in=content_refs).values_list("pk", "data"))
    for message in team_messages.filter(content_id__in=content_refs).order_by(
            "-session__created_at", "session_id", "index")[:limit * 4]:
        snippet = _find(decode_for_display(bytes(texts[message.content_id])), query)
        if snippet:
            found.append((message, "content", snippet))
    for message in team_messages.filter(pk__in=args_refs).order_by(
            "-session__created_at", "session_id", "index")[:limit * 4]:
        snippet = _find(_args_text(message.tool_calls), query)
        if snippet:
            found.append((message, "tool-call arguments", snippet))
    found.sort(key=lambda f: (-f[0].session.created_at.timestamp(), f[0].session_id,
                              f[0].index))
    return found[:limit]


def _call_indexes(messages: Sequence[Message]) -> dict[int, int]:
    """Message pk → the call whose view shows it, in one query. SPEC §1: call k is answered by
    the k-th assistant message, so a message is first sent (or, for an assistant message,
    produced) at the call numbered by the assistants before it."""
    assistants: dict[int, list[int]] = {}
    rows = Message.objects.filter(session_id__in={m.session_id for m in messages},
                                  role="assistant").values_list("session_id", "index")
    for session_id, index in rows.order_by("session_id", "index"):
        assistants.setdefault(session_id, []).append(index)
    return {m.pk: bisect.bisect_left(assistants.get(m.session_id, []), m.index)
            for m in messages}


def matching_session_ids(team, query: str, limit: int = 500) -> list[int]:
    """The sessions of the team holding `query` somewhere (for the sessions list's filter)."""
    return list(dict.fromkeys(m.session_id for m, _, _ in _matches(team, query, limit)))
