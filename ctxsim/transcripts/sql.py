"""SQL for many rows at once, in a number of queries that does not grow with the rows.

Django's `bulk_create`, `bulk_update` and `__in=[...]` lookups split long lists into batches
sized by the database's parameter limit (999 on SQLite: a 2,000-call session took ~100
INSERTs for its messages alone), so the queries an import issues grew with its size. Here a
list of values travels as *one* parameter (a JSON array on SQLite, an array on PostgreSQL), and
rows go through one `executemany` (pipelined by psycopg; one statement for Django's query log).

Each `executemany` outside a transaction runs inside `transaction.atomic()` (`_transaction`).
Django's foreign keys are `DEFERRABLE INITIALLY DEFERRED`: outside a transaction every pipelined
statement commits on its own, and a row whose parent a concurrent request has just deleted fails
at that implicit commit, inside the pipeline, where psycopg 3.3 cannot leave pipeline mode and
leaves the connection stuck ACTIVE (every later query of the request then fails: a 500). Inside
a transaction the check runs at the COMMIT, a plain statement, and raises a clean
`IntegrityError`; inside a caller's transaction the check waits for the caller's COMMIT, so no
savepoint is added (an import's query count stays what it was).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import nullcontext

from django.db import connection, transaction
from django.db.models.expressions import RawSQL


def _transaction():
    return nullcontext() if connection.in_atomic_block else transaction.atomic()


def values_in(values: Iterable[int | str]) -> RawSQL:
    """A subquery yielding `values`, bound as a single parameter: `filter(pk__in=values_in(ids))`
    is one query however many ids there are."""
    items = list(values)
    if not items:  # PostgreSQL cannot type an empty array here: callers skip the query
        raise ValueError("values_in() needs at least one value")
    if connection.vendor == "postgresql":
        kind = "bigint" if items and isinstance(items[0], int) else "text"
        return RawSQL(f"SELECT unnest(%s::{kind}[])", [items])
    if connection.vendor == "sqlite":
        return RawSQL("SELECT value FROM json_each(%s)", [json.dumps(items)])
    raise NotImplementedError(f"ctxsim runs on SQLite or PostgreSQL, not {connection.vendor}")


def _prepared(model, fields: Sequence[str], rows: Iterable[Sequence]) -> list[tuple]:
    """Row values as the database takes them (JSON encoded, booleans and bytes adapted), as
    the ORM would prepare them for a save. Fields without conversion are passed as they are."""
    meta = model._meta
    preps = []
    for name in fields:
        field = meta.get_field(name)
        plain = field.get_internal_type() in ("CharField", "TextField", "PositiveIntegerField",
                                               "PositiveBigIntegerField", "IntegerField",
                                               "BigAutoField", "AutoField")
        preps.append(None if plain else field)
    out = []
    for row in rows:
        out.append(tuple(
            value if field is None else field.get_db_prep_save(value, connection)
            for field, value in zip(preps, row, strict=True)
        ))
    return out


def insert_rows(model, fields: Sequence[str], rows: Sequence[Sequence], *,
                ignore_conflicts: bool = False, prepare: bool = False) -> None:
    """INSERT plain value tuples into `model`'s table with one `executemany`. Rows that break a
    unique constraint are skipped with `ignore_conflicts` (ON CONFLICT DO NOTHING, on
    PostgreSQL and SQLite alike). With `prepare`, values go through their fields' database
    preparation first (needed for JSON and boolean fields; foreign keys are given as ids)."""
    if not rows:
        return
    meta = model._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(f).column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    values = _prepared(model, fields, rows) if prepare else list(rows)
    with _transaction(), connection.cursor() as cursor:
        cursor.executemany(sql, values)


def update_rows(model, fields: Sequence[str], rows: Sequence[Sequence]) -> None:
    """UPDATE `fields` of rows given as (pk, value, ...) tuples, with one `executemany`."""
    if not rows:
        return
    meta = model._meta
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(meta.get_field(f).column)} = %s" for f in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s"
    values = _prepared(model, fields, (row[1:] for row in rows))
    with _transaction(), connection.cursor() as cursor:
        cursor.executemany(sql, [(*v, row[0]) for v, row in zip(values, rows, strict=True)])
