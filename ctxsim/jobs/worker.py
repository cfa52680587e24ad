"""The task worker every `make run` and `serve-prod` process runs: django-tasks-db's
`db_worker` loop, with each task in a forked child of bounded memory (issue 28).

- **Memory.** Each task runs in a child forked for it, with its address space limited to
  `CTXSIM_WORKER_MAX_MB` (`RLIMIT_AS`): a task that needs more gets a MemoryError where it
  allocates (its job row says so, as for any failure), or, when native code aborts instead,
  the child dies; either way the worker process itself lives on and takes the next task.
  Whatever the task held is given back when its child exits (a corpus sweep once kept its
  4.35 GB after it ended). `0` runs tasks in the worker process itself, as `db_worker` does.
- **A child that dies** (the limit, the kernel's OOM killer, a signal) leaves its task row
  "running": the worker marks it failed with why (`settle_lost_tasks`) and settles its job
  at once as a lost one (`lifecycle.task_lost`: queued again once, then failed).
- **A busy SQLite database.** `db_worker` retries a locked database while it claims a task,
  but not when it begins the claim's exclusive transaction: a write lock held longer than the
  busy timeout (20 s) stopped both workers ("database is locked"). The loop now waits and
  starts again (`LOCKED_PAUSE`), with a log line each time.
- **Priority.** A replay or a sweep runs `nice`d (`BACKGROUND_NICE`): with a worker per
  queue, an import never waits for one, and it is not slowed down by one either.
- **The tokenizer** (the default counter's BPE table) is loaded once, before the first task:
  a child forked for a task finds it loaded (it used to build it again, 0.2 s and 40 MB).
- **Signals.** SIGTERM or SIGINT to the worker reaches the running child too (a sweep stops
  between points and is queued again), and the worker exits once the child did.

`manage.py ctxsim_worker` takes `db_worker`'s options.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from types import FrameType

from django.conf import settings
from django.db import connections
from django.db.utils import OperationalError
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.utils import is_locked_database_exception

from ctxsim.heartbeat import settle_lost_tasks
from ctxsim.jobs import lifecycle

logger = logging.getLogger("ctxsim.jobs.worker")

LOCKED_PAUSE = 1.0  # seconds between claims while the database stays locked
CHILD_FAILED = 70  # a child's exit code when the task runner itself raised
# Tasks of other queues (replays, sweeps) run at a lower CPU priority than these, so on a
# machine with few cores an import (and the web server) is not slowed down by them.
URGENT_QUEUES = ("imports", "default")
BACKGROUND_NICE = 10


def memory_limit_bytes() -> int:
    """CTXSIM_WORKER_MAX_MB in bytes; 0: no limit, tasks run in the worker itself."""
    return max(0, settings.CTXSIM_WORKER_MAX_MB) * 1024 * 1024


def why_child_died(status: int, limit: int) -> str:
    """A sentence for a task row whose child process ended without writing its end."""
    mb = limit // (1024 * 1024)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        cause = ("killed (the kernel's OOM killer, or a kill -9)" if sig == signal.SIGKILL
                 else f"stopped by {name}")
        return (f"the task's process was {cause}; tasks may take up to "
                f"CTXSIM_WORKER_MAX_MB={mb} MB")
    return (f"the task's process exited with code {os.WEXITSTATUS(status)} (out of memory: "
            f"tasks may take up to CTXSIM_WORKER_MAX_MB={mb} MB)")


class BoundedWorker(Worker):
    """`db_worker`'s Worker: one forked child per task, within a memory limit."""

    child: int | None = None

    def run(self) -> None:
        from ctxsim.replays.services import warm_encoding
        from ctxsim.warm import calm_collector

        # Every import and replay tokenizes: each task's child, forked from here, finds the
        # table loaded and shares its pages, instead of building it again (0.2 s a task).
        warm_encoding()
        # A task's child replays sessions of millions of objects, which every full collection
        # walks: they run ten times less often there, and never walk what is loaded here.
        calm_collector()
        while True:
            try:
                super().run()
                return
            except OperationalError as exc:
                if not is_locked_database_exception(exc):
                    raise
                # Each time after the busy timeout (20 s by default): a line, not a flood.
                logger.warning("ctxsim worker %s: the database is locked; waiting",
                               self.worker_id)
                connections.close_all()
                if not self.running:
                    return
                time.sleep(LOCKED_PAUSE)

    def shutdown(self, signum: int, frame: FrameType | None) -> None:
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, signum)
        super().shutdown(signum, frame)

    def run_task(self, db_task_result) -> None:
        limit = memory_limit_bytes()
        if not limit:
            super().run_task(db_task_result)
            return
        # The child opens its own connections: one shared across a fork breaks both.
        connections.close_all()
        pid = os.fork()
        if pid == 0:
            self._run_in_child(db_task_result, limit)
        self.child, self.running_task = pid, True
        try:
            status = self._wait(pid)
        finally:
            self.child, self.running_task = None, False
            self._run_tasks += 1
        if status != 0:
            why = why_child_died(status, limit)
            logger.error("ctxsim worker %s: task %s: %s", self.worker_id, db_task_result.id,
                         why)
            settle_lost_tasks([db_task_result.id], why)
            lifecycle.task_lost(db_task_result.id, why)

    def _run_in_child(self, db_task_result, limit: int) -> None:
        import resource

        code = 0
        try:
            self.reset_signals()
            self.configure_signals()
            self.child = None
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            if db_task_result.queue_name not in URGENT_QUEUES:
                os.nice(BACKGROUND_NICE)  # an import, and the web server, go first
            super().run_task(db_task_result)  # writes the task's end, success or failure
        except BaseException:  # noqa: BLE001 (the parent settles the row)
            code = CHILD_FAILED
        finally:
            try:
                connections.close_all()
            finally:
                os._exit(code)

    @staticmethod
    def _wait(pid: int) -> int:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                return status
            except ChildProcessError:
                return 0
            except InterruptedError:  # pragma: no cover - PEP 475 retries already
                continue
