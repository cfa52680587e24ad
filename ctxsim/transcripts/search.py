"""Search inside contents (SPEC §13): index what a session holds, find the messages holding
the words of a query.

`search(team, query)` returns the messages of the team's sessions whose content or tool-call
arguments hold every term of `query` (`terms.parse`: words in any order, "quoted phrases" as
phrases, each a case-insensitive substring), newest sessions first, each with a snippet, the
call whose view shows the message and the upload it came from. `index_sessions` runs inside
the import's transaction (`store.save_sessions`), so a session is searchable as soon as it
exists.

Two tables map a reference to the text it indexes: `search_content` (ref = a `Content` id) and
`search_args` (ref = a `Message` id: its tool calls' arguments). Neither keeps a copy of the
text. SQLite uses a contentless FTS5 table with the trigram tokenizer (any substring of 3+
characters matches, case-insensitively; every word of 3+ characters must be there), PostgreSQL
a `tsvector` column with a GIN index (`simple` configuration; every term as a phrase query, so
on PostgreSQL a term matches whole words only), both behind `Backend`. The index only narrows
the search down to candidates, inside one query that also keeps the team's messages only and
orders them (so another team's matches never take the places of the team's own); the exact
text is checked here, so an index that over-matches (a phrase's words apart, a reference to a
content since deleted) never shows a wrong result. A term and a phrase are looked for in the
content and in the arguments apart: a message holding one word in each is not found.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from django.db import connection
from django.db.models import BinaryField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Substr

from ctxsim.pipeline.messages import decode_for_display

from .models import Content, Message, Session
from .sql import values_in
from .terms import SearchError, Terms, parse

__all__ = ["Hit", "SearchError", "index_sessions", "matching_session_ids", "search"]

TABLES = ("search_content", "search_args")
# Text beyond this many characters of one content is not indexed (a 50 MB log is searchable in
# its first 300,000 characters; PostgreSQL also caps a tsvector at 1 MB).
INDEX_CHARS = 300_000
INDEX_BATCH_CHARS = 32_000_000


class Backend(Protocol):
    def create(self, cursor) -> None: ...

    def drop(self, cursor) -> None: ...

    def indexed(self, cursor, table: str, refs: Sequence[int]) -> set[int]: ...

    def add(self, cursor, table: str, rows: Iterable[tuple[int, str]]) -> None: ...

    def matching(self, table: str, terms: Terms) -> tuple[str, list]:
        """A subquery (SQL, parameters) yielding the refs of `table` that may hold `terms`."""
        ...


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

    def matching(self, table: str, terms: Terms) -> tuple[str, list]:
        # Each word as an FTS5 string (a substring, for the trigram tokenizer), all required.
        expression = " AND ".join('"' + w.replace('"', '""') + '"' for w in terms.index_words())
        return f"SELECT rowid FROM {table} WHERE {table} MATCH %s", [expression]


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

    def matching(self, table: str, terms: Terms) -> tuple[str, list]:
        # Each term a phrase query, all required (`&&`; a term without a lexeme drops out).
        phrases = terms.index_terms()
        query = " && ".join(["phraseto_tsquery('simple', %s)"] * len(phrases))
        return f"SELECT ref FROM {table} WHERE document @@ ({query})", phrases


def for_vendor(vendor: str) -> Backend:
    if vendor == "sqlite":
        return SQLiteBackend()
    if vendor == "postgresql":
        return PostgresBackend()
    raise NotImplementedError(f"search inside contents needs SQLite or PostgreSQL, not {vendor}")


# --- indexing and searching ------------------------------------------------------------------

CANDIDATES = 500  # per table, the team's messages the index proposes, before the exact check
CHECK_BATCH = 50  # candidates whose texts are read at once


@dataclass(frozen=True)
class Hit:
    session_id: int
    session_title: str
    message_index: int
    call_index: int
    role: str
    where: str  # "content" | "tool-call arguments"
    snippet: tuple[tuple[str, bool], ...]  # (text, is a searched term)
    # What tells two uploads of one transcript apart.
    uploaded_at: datetime
    uploaded_by: str
    source_name: str

    @property
    def match(self) -> str:
        """The first searched term the snippet shows."""
        return next(text for text, marked in self.snippet if marked)


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


def search(team, query: str, limit: int = 50) -> list[Hit]:
    """Messages of the team's sessions that hold `query`; raises SearchError for bad queries."""
    found = _matches(team, parse(query), limit)
    calls = _call_indexes([message for message, _, _ in found])
    return [Hit(message.session_id, message.session.title, message.index, calls[message.pk],
                message.role, where, snippet, message.session.created_at,
                _username(message.session.uploaded_by), message.session.source_name)
            for message, where, snippet in found]


def _username(user) -> str:
    return user.get_username() if user is not None else ""


Found = tuple[Message, str, tuple[tuple[str, bool], ...]]


def _order(messages):
    return messages.order_by("-session__created_at", "session_id", "index")


def _matches(team, terms: Terms, limit: int) -> list[Found]:
    """(message, where, snippet) of the first `limit` messages holding `terms`, newest
    sessions first. One query per table finds the team's candidates in that order (the team
    filter inside the ranked query: no other team's match takes a place); the exact text
    decides."""
    backend = _backend()
    team_messages = Message.objects.filter(session__team=team).select_related(
        "session", "session__uploaded_by")
    content_sql = RawSQL(*backend.matching("search_content", terms))
    args_sql = RawSQL(*backend.matching("search_args", terms))
    in_content = _order(team_messages.filter(content_id__in=content_sql))[:CANDIDATES]
    in_args = _order(team_messages.filter(pk__in=args_sql))[:CANDIDATES]
    found = [*_checked(in_content, terms, limit, _content_texts, "content"),
             *_checked(in_args, terms, limit, _args_texts, "tool-call arguments")]
    found.sort(key=lambda f: (-f[0].session.created_at.timestamp(), f[0].session_id,
                              f[0].index))
    return found[:limit]


def _content_texts(messages: Sequence[Message]) -> dict[int, str]:
    # What the index holds of each content, no more: a 50 MB log is not read whole.
    ids = {m.content_id for m in messages}
    head = Substr("data", 1, INDEX_CHARS * 4, output_field=BinaryField())
    data = dict(Content.objects.filter(pk__in=values_in(ids)).annotate(head=head)
                .values_list("pk", "head"))
    return {m.pk: decode_for_display(bytes(data[m.content_id])) for m in messages
            if m.content_id in data}


def _args_texts(messages: Sequence[Message]) -> dict[int, str]:
    return {m.pk: _args_text(m.tool_calls) for m in messages}


def _checked(candidates, terms: Terms, limit: int, texts_of, where: str) -> list[Found]:
    """The first `limit` candidates whose text holds the terms, read CHECK_BATCH at a time
    (a candidate's content may be megabytes)."""
    found: list[Found] = []
    candidates = list(candidates)
    for start in range(0, len(candidates), CHECK_BATCH):
        batch = candidates[start:start + CHECK_BATCH]
        texts = texts_of(batch)
        for message in batch:
            snippet = terms.snippet(texts.get(message.pk, ""))
            if snippet:
                found.append((message, where, snippet))
                if len(found) == limit:
                    return found
    return found


def _call_indexes(messages: Sequence[Message]) -> dict[int, int]:
    """Message pk → the call whose view shows it, in one query. SPEC §1: call k is answered by
    the k-th assistant message, so a message is first sent at the call numbered by the
    assistants before it, and an assistant message at the next call (the one after the call it
    answers), if the transcript has one; the last assistant message opens the call it answers
    (the session page moves on to the trailing call when the replay has one)."""
    assistants: dict[int, list[int]] = {}
    rows = Message.objects.filter(session_id__in={m.session_id for m in messages},
                                  role="assistant").values_list("session_id", "index")
    for session_id, index in rows.order_by("session_id", "index"):
        assistants.setdefault(session_id, []).append(index)
    out = {}
    for m in messages:
        answers = assistants.get(m.session_id, [])
        before = bisect.bisect_left(answers, m.index)
        sent_later = m.role == "assistant" and before + 1 < len(answers)
        out[m.pk] = before + 1 if sent_later else before
    return out


def matching_session_ids(team, query: str, limit: int = 500) -> list[int]:
    """The sessions of the team holding `query` somewhere (for the sessions list's filter)."""
    return list(dict.fromkeys(m.session_id for m, _, _ in _matches(team, parse(query), limit)))
