"""A background job's heartbeat, beaten from a thread through every phase of the job.

A long phase reports nothing by itself (parsing one big JSON document, replaying one sweep
point of a 20,000-call session), and a job whose heartbeat stops is taken for one whose
worker died (issue 20 items 11 and 12). `Heartbeat(beat)` calls `beat()` every `every`
seconds while its block runs; `beat` writes the job row (conditionally: only while the job is
still running), and a failed write is tried again at the next beat.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, connection, connections


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
