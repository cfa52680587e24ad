"""Overview target (SPEC §13): `python -m bench.overview SESSIONS REPS`.

A fresh SQLite file database in a temporary folder (migrated, WAL), one team and user, and
SESSIONS generated sessions stored through `save_sessions`. A repetition, for 1 and then 2
workers: the stored figures and tasks are removed and the process forgets what it kept; the
clock starts; Django's test client opens the team overview (which queues its column's task and
`CTXSIM_OVERVIEW_TASKS_PER_COLUMN` − 1 copies starting elsewhere in it); that many `manage.py
db_worker --batch --interval 0.1` processes are started on the "replays" queue; when they have
exited the overview is polled until it says it is complete; the clock stops. Worker start-up is
inside the measurement for both counts, as it is in production. The CPU time the workers used is
reported beside: when two workers take longer than one while using about the same CPU, the
machine had no second core to give them.

Then the overview is opened again by a process that forgot everything it kept: the "second
open", served from what the workers stored.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from bench.common import ROOT, bench_owner, emit, median, note, output_dir, setup_django

PROFILES = "profiles=chatcli"
# db_worker sleeps this long whenever it finds SQLite locked by the other worker's write (its
# default, 1 s, made two workers slower than one on 200 short tasks).
WORKER_INTERVAL = "0.1"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("sessions", type=int)
    parser.add_argument("reps", type=int)
    parser.add_argument("--calls", type=int, default=6, help="calls of the smallest session")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="ctxsim-bench-overview-")
    try:
        emit(run(folder, args.sessions, args.reps, args.calls))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(folder: str, sessions: int, reps: int, calls: int) -> dict:
    load_before = os.getloadavg()[0]  # the machine's other work, before this one adds its own
    env = setup_django(folder, LOG_LEVEL="ERROR")
    from django.test import Client
    from django.urls import reverse
    from django_tasks_db.models import DBTaskResult

    from ctxsim.analysis.models import SessionResult
    from ctxsim.generator import generate_session
    from ctxsim.jobs.models import Job
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.models import DerivedTokenCount
    from ctxsim.transcripts.models import Content
    from ctxsim.transcripts.store import save_sessions

    team, user = bench_owner(wal=True)
    generated = [generate_session(calls + i % 10, seed=i, oversize_every=4)
                 for i in range(sessions)]
    save_sessions(generated, team=team, user=user, source_name="bench.jsonl")
    total_calls = sum(calls + i % 10 for i in range(sessions))
    note(f"stored {sessions} sessions ({total_calls} model calls)")
    log = open(output_dir() / "overview-workers.log", "w")  # noqa: SIM115 - closed below
    client = Client()
    client.force_login(user)
    url = f"{reverse('team-overview')}?{PROFILES}"
    worker_env = {**os.environ, **env,
                  "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                              os.environ.get("PYTHONPATH")]))}

    def complete() -> bool:
        return b'data-complete="true"' in client.get(url).content

    def first_open(workers: int) -> float:
        # As if nothing had been computed: no figures, no tasks, no stored token counts.
        SessionResult.objects.all().delete()
        Job.objects.filter(kind="overview").delete()
        DBTaskResult.objects.all().delete()
        Content.objects.update(token_counts={})
        DerivedTokenCount.objects.all().delete()
        REPLAYS.clear()
        start = time.perf_counter()
        opened = client.get(url)
        queued = SessionResult.objects.filter(figures__isnull=True).count()
        if opened.status_code != 200 or queued != sessions or not DBTaskResult.objects.exists():
            raise RuntimeError(f"the overview answered {opened.status_code} and queued "
                               f"{queued} of {sessions} sessions")
        procs = [subprocess.Popen(
            [sys.executable, "manage.py", "db_worker", "--batch", "--queue-name", "replays",
             "--no-startup-delay", "--no-reload", "--worker-id", f"bench-{workers}-{n}",
             "--interval", WORKER_INTERVAL],
            cwd=ROOT, env=worker_env, stdout=log, stderr=log) for n in range(workers)]
        codes = [p.wait() for p in procs]
        if any(codes):
            raise RuntimeError(f"a worker exited with {codes} (see {log.name})")
        while not complete():  # a worker may exit while the other finishes its last task
            time.sleep(0.05)
        return time.perf_counter() - start

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    times: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[float]] = {1: [], 2: []}
    for rep in range(reps):
        for workers in (1, 2) if rep % 2 == 0 else (2, 1):
            before = children_cpu()
            times[workers].append(first_open(workers))
            cpu[workers].append(children_cpu() - before)
            note(f"{workers} worker(s): {times[workers][-1]:.2f}s, "
                 f"{cpu[workers][-1]:.2f}s of CPU in the workers")
    seconds = []
    for _ in range(reps):
        REPLAYS.clear()
        start = time.perf_counter()
        response = client.get(url)
        seconds.append(time.perf_counter() - start)
        if b'data-complete="true"' not in response.content:
            raise RuntimeError("the second open is not complete")
    if DBTaskResult.objects.exclude(status="SUCCESSFUL").exists():
        raise RuntimeError("a second open queued tasks again")
    log.close()
    return {"sessions": sessions, "calls": total_calls, "one": median(times[1]),
            "two": median(times[2]), "one_runs": times[1], "two_runs": times[2],
            "one_cpu": median(cpu[1]), "two_cpu": median(cpu[2]),
            "second_open": median(seconds), "cores": os.cpu_count(),
            "load": load_before}


if __name__ == "__main__":
    sys.exit(main())
