"""How the migrations of issue 30 move each kind's rows onto `Job` (used by migrations only).

A kind's old table is renamed `Old<Kind>`, its new table (payload only, extending `Job`) is
created, and `carry` writes one `Job` per old row (its lifecycle fields, under their new names)
and the payload beside it, then the old table is dropped. Import jobs keep their ids (the API
answers them and clients poll them); other kinds get new ones, and the queued tasks naming an
old id (`task_path`) are given the new one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

LIFECYCLE = ("user_id", "team_id", "status", "done", "total", "message", "task_id", "attempts",
             "started_at", "heartbeat_at", "finished_at")


def team_of_session(apps) -> Callable[[Mapping[str, Any]], int]:
    """The team of a row's session (kinds that keep no team of their own)."""
    teams = dict(apps.get_model("transcripts", "Session").objects.values_list("pk", "team_id"))
    return lambda row: teams[row["session_id"]]


def carry(apps, schema_editor, *, app: str, old: str, new: str, kind: str, queue: str,
          rename: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None,
          team_of: Callable[[Mapping[str, Any]], int] | None = None, keep_ids: bool = False,
          task_path: str = "") -> dict[int, int]:
    """Move every row of `old` to a `Job` and a row of `new`; returns {old id: new id}."""
    job_model = apps.get_model("jobs", "Job")
    old_model, new_model = apps.get_model(app, old), apps.get_model(app, new)
    payload = [f.attname for f in new_model._meta.local_concrete_fields if not f.primary_key]
    ids: dict[int, int] = {}
    for row in old_model.objects.order_by("pk").values():
        for before, after in (rename or {}).items():
            row[after] = row.pop(before)
        life = {name: row[name] for name in LIFECYCLE if name in row}
        if "team_id" not in life and team_of is not None:
            life["team_id"] = team_of(row)
        job = job_model(kind=kind, queue=queue, **life, **(extra or {}))
        if keep_ids:
            job.pk = row["id"]
        job.save(force_insert=True)
        if "created_at" in row:  # (a corpus sweep's parts kept none: created now)
            job_model.objects.filter(pk=job.pk).update(created_at=row["created_at"])
        new_model(job_ptr_id=job.pk, **{name: row[name] for name in payload}).save_base(
            raw=True, force_insert=True)
        ids[row["id"]] = job.pk
    if keep_ids and ids:
        from django.core.management.color import no_style

        with schema_editor.connection.cursor() as cursor:
            for sql in schema_editor.connection.ops.sequence_reset_sql(no_style(), [job_model]):
                cursor.execute(sql)
    if task_path:
        _rename_task_args(apps, task_path, ids)
    return ids


def _rename_task_args(apps, task_path: str, ids: Mapping[int, int]) -> None:
    """Queued (or running) tasks of `task_path` whose first argument is an old id."""
    tasks = apps.get_model("django_tasks_database", "DBTaskResult")
    for result in tasks.objects.filter(task_path=task_path, status__in=("READY", "RUNNING")):
        args = list(result.args_kwargs.get("args") or [])
        if args and args[0] in ids:
            args[0] = ids[args[0]]
            result.args_kwargs = {**result.args_kwargs, "args": args}
            result.save(update_fields=["args_kwargs"])
