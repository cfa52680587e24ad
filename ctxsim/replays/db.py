"""Raw SQL where the ORM costs more than the work: replays store hundreds of rows at a time."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection


def insert_rows(model, fields: Sequence[str], rows: Sequence[tuple], *,
                ignore_conflicts: bool = False) -> None:
    """INSERT plain value tuples into `model`'s table with one `executemany` (pipelined by
    psycopg). A replay stores hundreds of spill rows; `bulk_create` spent half its time
    building model instances for them. Rows that break a unique constraint are skipped with
    `ignore_conflicts` (ON CONFLICT DO NOTHING: PostgreSQL and SQLite alike)."""
    if not rows:
        return
    meta = model._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(f).column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
