"""A background job's heartbeat, beaten from a thread through every phase of the job.

A long phase reports nothing by itself (parsing one big JSON document, replaying one sweep
point of a 20,000-call session), and a job whose heartbeat stops is taken for one whose
worker died (issue 20 items 11 and 12). `Heartbeat(beat)` calls `beat()` every `every`
seconds while its block runs; `beat` writes the job row (conditionally: only while the job is
still running), and a failed write is tried again at the next beat.

`settle_lost_tasks` is the other half of a dead worker's recovery: the task backend's rows of
the jobs a recovery settled.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.db import DatabaseError, connection, connections
from django.utils import timezone


class Heartbeat:
    """Context manager: beat from a daemon thread while the block runs. Not started inside an
    open transaction (tests run in one): another connection's writes would wait for it."""

    def __init__(self, beat: Callable[[], Any], every: float, name: str = "heartbeat"):
        self.beat = beat
        self.every = every
        self.name = name
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        if not connection.in_atomic_block:
            self.thread = threading.Thread(target=self._run, daemon=True, name=self.name)
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        try:
            while not self.stop.wait(self.every):
                # On SQLite the job's own write transaction may hold the lock: beat again later.
                with contextlib.suppress(DatabaseError):
                    self.beat()
        finally:
            connections.close_all()


class WorkerLost(Exception):
    """What a task row says when its worker died: named in `settle_lost_tasks`' rows."""


def settle_lost_tasks(task_ids: Iterable[str], why: str) -> int:
    """Mark the task backend's rows of these tasks failed while they still say "running": their
    worker died (their job row, settled by the caller, says what happened). django-tasks-db
    only writes a task's end from the worker that ran it, so without this its rows of a
    killed worker stay RUNNING forever. Other backends keep no rows: nothing to do. Returns
    how many rows were settled."""
    ids = []
    for raw in task_ids:
        try:
            ids.append(uuid.UUID(str(raw)))
        except ValueError:
            continue  # no task id recorded (yet), or another backend's
    if not ids:
        return 0
    try:
        from django_tasks_db.models import DBTaskResult
    except ImportError:  # pragma: no cover - the database backend is a dependency
        return 0
    return DBTaskResult.objects.filter(pk__in=ids, status="RUNNING").update(
        status="FAILED", finished_at=timezone.now(), return_value=None,
        exception_class_path=f"{WorkerLost.__module__}.{WorkerLost.__qualname__}",
        traceback=why)
