"""Real task workers for the kill tests (issue 20 acceptance 5): `manage.py db_worker` in a
subprocess on the test's own database, killed with SIGKILL where the test wants it.

`running(env, stop_at=PHASE)` starts the worker through this module, which pauses the worker
for good when a job enters PHASE — one of the phases the code declares
(`ctxsim.transcripts.tasks.PHASES` for imports, `ctxsim.analysis.tasks.PHASES` for sweeps,
`REPLAYING`, `WRITING_TRACE`, `REPLAYING_TO_CALL`, `COMPUTING_INSIGHTS` and `COMPUTING_FIGURES`
for the replays queue's kinds, `SWEEPING_SESSION` for a corpus sweep's part),
after the job's row already says so — so the test sees the phase in the database and kills
the worker there, never by guessing with a sleep. Without `stop_at` it is the plain command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKER_ARGS = ["--queue-name", "*", "--interval", "0.1", "--no-reload", "--no-startup-delay"]
# The PostgreSQL application name of every worker these tests start (libpq reads PGAPPNAME),
# so a killed worker's server-side sessions can be found and ended (`_end_sessions`).
APP_NAME = "ctxsim-test-worker"


def worker_env(settings, **extra: str) -> dict[str, str]:
    """The environment of a worker on this test's database (a transaction=True test: the
    worker sees what the test commits) and media folder."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        url = f"sqlite:///{db['NAME']}"
    else:
        url = (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:"
               f"{db['PORT'] or 5432}/{db['NAME']}")
    env = {**os.environ, "DATABASE_URL": url, "MEDIA_ROOT": str(settings.MEDIA_ROOT),
           "CTXSIM_WARM_SESSIONS": "0", "PYTHONPATH": str(ROOT), "PGAPPNAME": APP_NAME,
           **extra}
    env.pop("CACHE_URL", None)
    return env


@contextlib.contextmanager
def running(env: dict[str, str], stop_at: str | None = None, *, queues: str = "*",
            command_name: str = "db_worker") -> Iterator[subprocess.Popen]:
    """A worker for the block (killed at the end if it still runs): `db_worker`, or with
    `command_name="ctxsim_worker"` the one `make run` starts (`ctxsim.jobs.worker`), taking
    `queues`."""
    if stop_at is None:
        args = [*WORKER_ARGS]
        args[1] = queues
        command = [sys.executable, "manage.py", command_name, *args]
    else:
        command = [sys.executable, "-m", "tests.web.workers", *WORKER_ARGS]
        env = {**env, "CTXSIM_STOP_AT": stop_at}
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        if process.stderr is not None:
            process.stderr.close()
        _end_sessions()


def kill(process: subprocess.Popen) -> None:
    """SIGKILL: no handler runs, nothing is written on the way out."""
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


def _end_sessions(seconds: float = 30) -> None:
    """On PostgreSQL, end the server sessions of killed workers and wait until they are gone.

    A SIGKILLed client's backend finishes the query it was running before it notices; one
    still polling for tasks (`SELECT … FOR UPDATE`) deadlocks with the TRUNCATE that flushes
    the test database afterwards, and the next test then starts on the old rows."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    mine = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s AND pid <> pg_backend_pid()")
    deadline = time.monotonic() + seconds
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(mine, [APP_NAME])
            pids = [row[0] for row in cursor.fetchall()]
            if not pids:
                return
            for pid in pids:
                cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
            time.sleep(0.05)


def wait_for[T](predicate: Callable[[], T], seconds: float, what: str,
                process: subprocess.Popen | None = None) -> T:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise AssertionError(f"the worker exited waiting for {what}: {err[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")


# --- the worker that stops at a phase (run as `python -m tests.web.workers ARGS`) ---------------


# A background replay's and a trace file's one phase: the worker replays, or writes the trace.
REPLAYING = "replaying"
WRITING_TRACE = "writing the trace"
COMPUTING_INSIGHTS = "computing the insights"
# A deep call view's one phase: the worker replays to the call (`ctxsim.replays.deep_calls`).
REPLAYING_TO_CALL = "replaying to the call"
# An overview column task's and a corpus sweep part's one phase (each inside its heartbeat).
COMPUTING_FIGURES = "computing an overview column"
SWEEPING_SESSION = "sweeping a session of a corpus sweep"


def _stop_at(target: str) -> None:
    """Make the phases of `target`'s kind block forever once their job is in `target`."""
    from ctxsim.analysis import tasks as sweep_tasks
    from ctxsim.analysis.models import Sweep
    from ctxsim.insights import sweep as sweeps
    from ctxsim.transcripts import tasks as imports

    forever = threading.Event()

    def blocked(*args: Any, **kwargs: Any) -> None:
        forever.wait()

    if target in imports.PHASES:
        enter = imports.JobReporter.enter

        def entering(self, phase: str) -> None:
            enter(self, phase)  # the row says the phase now
            if phase == target:
                forever.wait()

        imports.JobReporter.enter = entering  # type: ignore[method-assign]
    elif target in sweep_tasks.PHASES:
        def pause_if_there() -> None:
            row = Sweep.objects.filter(status=Sweep.Status.RUNNING).first()
            if row is not None and sweep_tasks.phase_of(row) == target:
                forever.wait()

        point = sweep_tasks.insights_for  # each point starts with its insights

        def next_point(*args: Any, **kwargs: Any):
            pause_if_there()
            return point(*args, **kwargs)

        run_sweep = sweeps.run_sweep

        def whole_sweep(*args: Any, **kwargs: Any):
            points = run_sweep(*args, **kwargs)
            pause_if_there()  # every point computed, the result not written yet
            return points

        sweep_tasks.insights_for = next_point
        sweeps.run_sweep = whole_sweep
    elif target == COMPUTING_INSIGHTS:
        sweep_tasks.insights_for = blocked  # inside the insights job's heartbeat
    elif target in (COMPUTING_FIGURES, SWEEPING_SESSION):
        from ctxsim.overview import tasks as overview

        if target == COMPUTING_FIGURES:
            overview.session_figures = blocked  # the row is claimed by then
        else:
            overview.sweeps.evaluate = blocked  # type: ignore[assignment]
    elif target in (REPLAYING, WRITING_TRACE):
        # Both run inside their job's heartbeat: the row says running, beaten, until the kill.
        from ctxsim.replays import services

        name = "summary_for" if target == REPLAYING else "trace_file"
        setattr(services, name, blocked)
    elif target == REPLAYING_TO_CALL:
        from ctxsim.replays import deep_calls

        deep_calls.replay_to_call = blocked  # inside the call replay's heartbeat
    else:
        raise SystemExit(f"no phase {target!r} is declared")


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxsim.settings")
    import django

    django.setup()
    from django.core.management import call_command

    _stop_at(os.environ["CTXSIM_STOP_AT"])
    call_command("db_worker", *sys.argv[1:])
