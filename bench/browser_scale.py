"""Issue 31 item 2 in a real browser: `python -m bench.browser_scale [--calls 16000] [--reps 2]`.

Serves `bench.scale`'s database (its cached SQLite copy, built on a miss: several minutes for
the 16,000-call session) the production way, `bin/serve-prod` on a free loopback port
(gunicorn's workers, the task workers, DEBUG off, production's inline-replay bound), and
drives Debian's Chromium through Playwright as a reviewer does, `--reps` times, each time on a
fresh server on a fresh copy of the database (SQLite, as `bench.scale` builds it; the issue's
own figures were taken on PostgreSQL), with a file cache of its own and nothing in memory:

- `open`: the session page where a visitor lands (the call that sent the most), from the
  navigation until its call view is visible;
- `step`: six `k` then six `j` (`--steps`), one every 1.5 s, each from the key until the
  call view shows the call it asked for;
- `progress`: a per-result cap nobody replayed typed in, from its change event until the
  page shows the worker's progress ("Replaying in the background"), the replay itself being
  the worker's (`make bench`'s `replay-scale` times it).

Prints each figure against the issue's targets (first open 3 s, a step 0.5 s, the progress
1 s) and exits 1 when one is missed. Seconds on this machine, not ratios: this is the issue's
own check, run by hand, not one of `make bench`'s targets.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench.common import (
    CHROMIUM_ARGS,
    ROOT,
    chromium_path,
    django_environment,
    emit,
    note,
    output_dir,
)
from loadtest.run import free_port, stop, wait_until_up

TARGETS = {"open": 3.0, "step": 0.5, "progress": 1.0}  # seconds (issue 31 item 2)
PASSWORD = "bench-pass-123"  # `bench.common.bench_owner`'s user
STEPS = 6
STEP_PAUSE = 1.5
NEW_CAPS = ("7321", "6543", "5877")  # a value per repetition nobody replayed before


def serve(folder: str, port: int, log) -> subprocess.Popen:
    env = {**os.environ, **django_environment(folder), "ALLOWED_HOSTS": "127.0.0.1",
           "CACHE_URL": f"filecache://{folder}/cache", "CTXSIM_LOCK_DIR": f"{folder}/locks",
           "HOST": "127.0.0.1", "PORT": str(port), "GUNICORN_ACCESS_LOG": os.devnull,
           "LOG_LEVEL": "ERROR"}
    for name in ("CTXSIM_S3_BUCKET", "AWS_STORAGE_BUCKET_NAME", "CTXSIM_INLINE_REPLAY_CALLS"):
        env.pop(name, None)
    return subprocess.Popen([str(ROOT / "bin" / "serve-prod")], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def call_of(page) -> int:
    return int(page.locator("#call-view").get_attribute("data-call"))


def until_call(page, wanted: int, started: float) -> float:
    page.wait_for_function(
        "n => document.getElementById('call-view')?.dataset.call === String(n)", arg=wanted,
        timeout=60_000)
    return time.perf_counter() - started


def visit(browser, base: str, session_id: int, cap: str, steps_each: int) -> dict:
    """One reviewer's visit on a fresh server: the figures of the module docstring."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{base}/login/")
    page.fill("#id_username", "bench")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state("load")
    started = time.perf_counter()
    page.goto(f"{base}/sessions/{session_id}/", timeout=60_000)
    page.locator("#call-view").wait_for(state="visible", timeout=60_000)
    opened = time.perf_counter() - started
    steps = []
    for key, move in (("k", -1), ("j", 1)):
        for _ in range(steps_each):
            time.sleep(STEP_PAUSE)
            wanted = call_of(page) + move
            started = time.perf_counter()
            page.keyboard.press(key)
            steps.append(until_call(page, wanted, started))
    field = page.locator("#env-CHATCLI_TOOL_RESULT_MAX_CHARS")
    field.fill(cap)
    started = time.perf_counter()
    field.dispatch_event("change")
    page.locator("#replay").get_by_text("Replaying in the background").wait_for(timeout=60_000)
    progress = time.perf_counter() - started
    page.close()
    return {"open": opened, "step": steps, "progress": progress}


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return value


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=positive, default=16000)
    parser.add_argument("--reps", type=positive, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=positive, default=STEPS,
                        help="k presses, then as many j")
    args = parser.parse_args()
    chromium = chromium_path()
    if not chromium:
        print("bench.browser_scale needs Debian's chromium (apt-get install chromium, or "
              "CTXSIM_CHROMIUM)", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    from bench.scale import prepared

    folder = tempfile.mkdtemp(prefix="ctxsim-bench-browser-")
    try:
        _env, (_team, _user, rows) = prepared(folder, [args.calls], args.seed,
                                              {"LOG_LEVEL": "ERROR"})
        session_id = rows[0].pk
        from django.db import connections

        connections.close_all()
        database = f"{folder}/db.sqlite3"
        pristine = f"{folder}/pristine.sqlite3"
        shutil.copyfile(database, pristine)
        visits = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            for rep in range(args.reps):
                # The previous server's write-ahead log belongs to the copy it served.
                for stale in (f"{database}-wal", f"{database}-shm"):
                    if os.path.exists(stale):
                        os.remove(stale)
                shutil.copyfile(pristine, database)
                for stale in ("cache", "media"):
                    shutil.rmtree(f"{folder}/{stale}", ignore_errors=True)
                port = free_port()
                with open(output_dir() / "browser-scale-server.log", "w") as log:
                    server = serve(folder, port, log)
                    try:
                        wait_until_up(port, server)
                        visit_figures = visit(browser, f"http://127.0.0.1:{port}", session_id,
                                              NEW_CAPS[rep % len(NEW_CAPS)], args.steps)
                    finally:
                        stop(server)
                visits.append(visit_figures)
                note(f"visit {rep + 1}: open {visit_figures['open']:.2f}s, steps "
                     f"{min(visit_figures['step']):.2f}-{max(visit_figures['step']):.2f}s, "
                     f"progress {visit_figures['progress']:.2f}s")
            browser.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    worst = {"open": max(v["open"] for v in visits),
             "step": max(s for v in visits for s in v["step"]),
             "progress": max(v["progress"] for v in visits)}
    missed = [name for name, limit in TARGETS.items() if worst[name] > limit]
    emit({"calls": args.calls, "visits": visits, "worst": worst, "targets": TARGETS,
          "missed": missed})
    for name, limit in TARGETS.items():
        print(f"{name:9s} worst {worst[name]:6.2f}s  target {limit:.1f}s  "
              f"{'MISS' if name in missed else 'PASS'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
