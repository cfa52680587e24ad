"""Import worker memory (issue 21): `python -m bench.worker_memory PATH`.

A fresh SQLite file database in a temporary folder (migrated, WAL), one team and user, and a
real task worker, `manage.py ctxsim_worker --queue-name imports` (production's), with
`CTXSIM_WORKER_MAX_MB=0` so the task runs in the process measured rather than in a child.
Once it has polled the empty queue for IDLE_SECONDS its resident memory is read (`VmRSS` in
/proc: the idle RSS, with Django, the importers and the tokenizer loaded as a worker has them;
until stop 39 the worker loaded the tokenizer at its first task, so its ~40 MB counted as the
import's).
Then PATH is queued as an upload would queue it (`queue_import`, the view's service), the
worker imports it, and when the job is done its peak resident memory is read (`VmHWM`, the
kernel's high-water mark of the worker process). The target is (peak - idle) / file size.

Linux only (/proc); elsewhere it exits with a message.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import ROOT, bench_owner, emit, note, output_dir, setup_django

IDLE_SECONDS = 3.0
TIMEOUT_SECONDS = 900


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    if not Path("/proc/self/status").exists():
        raise SystemExit("bench.worker_memory reads /proc (Linux)")
    folder = tempfile.mkdtemp(prefix="ctxsim-bench-worker-")
    try:
        emit(run(folder, args.path))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def idle_worker(env: dict[str, str], queue: str,
                name: str) -> Iterator[tuple[subprocess.Popen, int]]:
    """Production's task worker (`ctxsim_worker`) on `queue`, with `CTXSIM_WORKER_MAX_MB=0` so
    its tasks run in the process measured, not in a child; yields it with its RSS after it
    idled IDLE_SECONDS (Django and the tokenizer loaded), and stops it. Its output goes to
    `bench-output/<name>.log`."""
    worker_env = {**os.environ, **env, "CTXSIM_WORKER_MAX_MB": "0",
                  "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                              os.environ.get("PYTHONPATH")]))}
    with open(output_dir() / f"{name}.log", "w") as log:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "ctxsim_worker", "--queue-name", queue,
             "--no-startup-delay", "--no-reload", "--worker-id", name, "--interval", "0.2"],
            cwd=ROOT, env=worker_env, stdout=log, stderr=log)
        try:
            time.sleep(IDLE_SECONDS)
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited with {worker.returncode} (see {log.name})")
            yield worker, status_kib(worker.pid, "VmRSS") * 1024
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def run(folder: str, path: Path) -> dict:
    env = setup_django(folder, LOG_LEVEL="ERROR")
    from django.core.files.uploadedfile import UploadedFile

    from ctxsim.transcripts.models import ImportJob
    from ctxsim.transcripts.services import queue_import

    team, user = bench_owner(wal=True)
    name = "worker-memory"
    with idle_worker(env, "imports", name) as (worker, idle):
        size = path.stat().st_size
        start = time.perf_counter()
        with path.open("rb") as handle:
            upload = UploadedFile(handle, name=path.name, size=size)
            job = queue_import(upload, team=team, user=user)
        phase, highest = "", 0  # what the job said when the sampled RSS was highest
        while True:
            job.refresh_from_db()
            if not job.is_active:
                break
            rss = status_kib(worker.pid, "VmRSS")
            if rss > highest:
                highest, phase = rss, f"{job.progress}% {job.message}"
            if worker.poll() is not None:
                raise RuntimeError(f"the worker died ({worker.returncode}, see "
                                   f"{output_dir() / name}.log)")
            if time.perf_counter() - start > TIMEOUT_SECONDS:
                raise RuntimeError("the import did not finish in time")
            time.sleep(0.1)
        seconds = time.perf_counter() - start
        peak = status_kib(worker.pid, "VmHWM") * 1024
        if job.status != ImportJob.Status.DONE:
            raise RuntimeError(f"the import ended {job.status}: {job.message}")
        note(f"worker idle {idle / 1e6:.0f} MB, peak {peak / 1e6:.0f} MB, "
             f"import {seconds:.1f}s; highest RSS sampled at {phase!r}")
    return {"file_bytes": size, "idle_bytes": idle, "peak_bytes": peak, "seconds": seconds,
            "sessions": len(job.session_ids), "phase": phase}


if __name__ == "__main__":
    main()
