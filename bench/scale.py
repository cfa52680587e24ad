"""Issue 31's scale targets: `python -m bench.scale MODE CALLS[,CALLS...] [--reps N]`.

Every mode uses a SQLite file database in a temporary folder (WAL), one team and user, and
generated sessions of 2,000, 4,000 and 16,000 calls (or the sizes asked for) stored through
`save_sessions` and followed as an import follows its sessions (`on_import_finished`, with the
production bound `IMPORT_BOUND` of inline replays): the default profile's summary and the token
counts are stored, and the call the page opens on is kept as its worker's row. Building it
takes long (the 16,000-call session holds ~450 MB), so it is built once and cached in
`bench-output/` (named after the sizes, the seed and the sources of the generator, the store,
the kept call view and the migrations); each run copies it into its own folder. "A fresh
process" below is this process after `REPLAYS.clear()` with fresh token counters
(`isolated_counters`) and Django's cache cleared: another web or worker process, which finds
only the database. Once the database is set up, this process calms its collector as gunicorn's
master and the task worker do before they fork (`ctxsim.warm.calm_collector`).

- `pages`: per size, as production serves it (`IMPORT_BOUND`), the page at the middle call is
  asked once and the worker's task that replays to it run here (untimed; it keeps the calls
  around it too). Then per repetition, in a fresh process, Django's test client opens the
  session page (where a visitor lands, the call that sent the most; the stored summary is
  read, and the call view the import kept) — `open`; in another fresh process it opens the
  page at the middle call (untimed) and steps to the next one as `j` does (the htmx call-view
  swap; the view the worker made) — `step`; and the same step in a fresh process with every
  size replayed inline (the step a web process makes from a replay it paused, which production
  does up to `IMPORT_BOUND` calls) — `inline_step`, for information.
- `replay`: per size and repetition the default profile's replay of the session as the
  background worker runs it (`summary_for` with its progress callback, the stored summary
  removed first), in a fresh process that finds the token counts the import stored — `replay`.
- `poll`: one size; the insights page of the session with its columns handed to the worker
  (`CTXSIM_INSIGHTS_INLINE_CALLS=0`, no worker running, so they stay queued), then the bytes
  of one poll of its columns' jobs (the page's status element, `GET /jobs/<pk>/?also=…`) —
  `poll_bytes`; the bytes of the section itself once every column is stored are printed
  beside (`section_bytes`).
- `worker-memory`: one size; a real `manage.py ctxsim_worker --queue-name replays`
  (production's worker, with `CTXSIM_WORKER_MAX_MB=0`: the task runs in the process measured,
  not in a child) idles IDLE_SECONDS (its RSS then: `idle`, the tokenizer loaded), then
  replays the session under its default profile as a
  session page request queues it (`background.pending_for`, the stored summary removed); its
  peak RSS (`VmHWM`) minus the idle RSS, against the session's stored size (`total_bytes`).
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import shutil
import tempfile
import time

from bench.common import ROOT, bench_owner, emit, median, note, output_dir, setup_django, timed
from bench.worker_memory import idle_worker, status_kib
from ctxsim.warm import calm_collector

STEP = {"HX-Request": "true", "HX-Target": "div#call-view"}
POLL = {"HX-Request": "true"}  # htmx polling a job from the page
SECTION = {"HX-Request": "true", "HX-Target": "section#insights"}
TIMEOUT_SECONDS = 1800
# Sessions longer replay on the worker: CTXSIM_INLINE_REPLAY_CALLS's default (ctxsim/settings.py).
IMPORT_BOUND = 1000


def stored(calls: int, seed: int, team, user):
    from django.test import override_settings

    from ctxsim.generator import generate_session
    from ctxsim.replays.receivers import on_import_finished
    from ctxsim.transcripts.store import save_sessions

    start = time.perf_counter()
    row = save_sessions([generate_session(calls, seed)], team=team, user=user,
                        source_name=f"bench-{calls}.jsonl")[0]
    with override_settings(CTXSIM_INLINE_REPLAY_CALLS=IMPORT_BOUND):
        on_import_finished(None, sessions=[row])
    note(f"{calls} calls stored ({row.total_bytes / 1e6:.0f} MB) in "
         f"{time.perf_counter() - start:.0f}s")
    return row


SIZES = (2000, 4000, 16000)


def _version() -> str:
    digest = hashlib.sha256()
    # What is stored: the sessions, their summaries and the kept call view (its shape).
    replays = ROOT / "ctxsim" / "replays"
    sources = [ROOT / "ctxsim" / "generator.py", ROOT / "ctxsim" / "transcripts" / "store.py",
               *(replays / f"{name}.py" for name in ("receivers", "deep_calls", "call_view",
                                                      "message_list")),
               *sorted((ROOT / "ctxsim").glob("*/migrations/0*.py"))]
    for path in sources:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


def prepared(folder: str, sizes: list[int], seed: int, extra: dict) -> tuple[dict, list]:
    """Set Django up on a copy of the cached database holding `sizes` (built on a miss);
    returns the settings and (team, user, rows by size)."""
    wanted = sorted(set(sizes) | (set(SIZES) if set(sizes) <= set(SIZES) else set()))
    name = f"scale-{'-'.join(map(str, wanted))}-seed{seed}-{_version()}.sqlite3"
    cached = output_dir() / name
    if cached.exists():
        shutil.copyfile(cached, f"{folder}/db.sqlite3")
    env = setup_django(folder, **extra)
    from django.contrib.auth import get_user_model
    from django.db import connection

    from ctxsim.teams.models import Team
    from ctxsim.transcripts.models import Session

    if cached.exists():
        team, user = Team.objects.get(slug="bench"), get_user_model().objects.get(
            username="bench")
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
    else:
        team, user = bench_owner(wal=True)
        for n in wanted:
            stored(n, seed + n, team, user)
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        partial = cached.with_suffix(".partial")
        shutil.copyfile(f"{folder}/db.sqlite3", partial)
        partial.rename(cached)
    rows = {s.model_call_count: s for s in Session.objects.filter(parent__isnull=True)}
    return env, [team, user, [rows[n] for n in sizes]]


def fresh_process():
    """Within the block, this process keeps nothing from before (see the module docstring),
    and Django's cache, which processes share (rendered call views), starts empty."""
    from django.core.cache import cache

    from ctxsim.replays.cache import REPLAYS

    REPLAYS.clear()
    cache.clear()
    return REPLAYS.another_process()


def pages(row, user, reps: int) -> dict:
    from django.test import Client, override_settings
    from django.urls import reverse

    from ctxsim.replays.state import ReplaySettings

    client = Client()
    client.force_login(user)
    url = f"{reverse('session-detail', args=[row.pk])}?{ReplaySettings().query()}"
    middle = row.model_call_count // 2
    production = override_settings(CTXSIM_INLINE_REPLAY_CALLS=IMPORT_BOUND)
    with fresh_process(), production:  # the worker replays to the middle call once, untimed
        client.get(f"{url}&call={middle}")
        worked = run_call_jobs()
    opens, steps, inline = [], [], []
    for _ in range(reps):
        with fresh_process(), production:
            took, response = timed(lambda: client.get(url))
            check(response, url)
            opens.append(took)
        with fresh_process(), production:
            check(client.get(f"{url}&call={middle}"), url)
            took, response = timed(lambda: client.get(f"{url}&call={middle + 1}", headers=STEP))
            check(response, url)
            steps.append(took)
        with fresh_process():  # every size replayed inline (for information)
            check(client.get(f"{url}&call={middle}"), url)
            took, response = timed(lambda: client.get(f"{url}&call={middle + 1}", headers=STEP))
            check(response, url)
            inline.append(took)
    return {"calls": row.model_call_count, "bytes": row.total_bytes, "open": median(opens),
            "open_times": opens, "step": median(steps), "step_times": steps,
            "inline_step": median(inline), "inline_step_times": inline, "worker": worked}


def run_call_jobs() -> float:
    """The deep call views queued for the worker, made here as its task makes them (then let
    go, `releases_memory`); the seconds it took."""
    from ctxsim.jobs.models import Status
    from ctxsim.replays import deep_calls
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.models import CallReplay

    start = time.perf_counter()
    for pk in CallReplay.objects.filter(status=Status.QUEUED).values_list("pk", flat=True):
        deep_calls.run_call_replay(pk)
        REPLAYS.forget_replays()
    return time.perf_counter() - start


def check(response, url: str) -> None:
    if response.status_code != 200:
        raise SystemExit(f"GET {url} answered {response.status_code}")


def replay(row, reps: int) -> dict:
    from ctxsim.replays.models import ReplayRun
    from ctxsim.replays.services import default_settings, summary_for

    settings = default_settings(row)
    times = []
    for _ in range(reps):
        ReplayRun.objects.filter(session=row).delete()
        with fresh_process():
            done: list[int] = []
            took, run = timed(lambda seen=done: summary_for(row, settings,
                                                            progress=seen.append))
            times.append(took)
        assert len(run.calls) == row.model_call_count == done[-1]
    return {"calls": row.model_call_count, "bytes": row.total_bytes, "replay": median(times),
            "replay_times": times}


def poll(row, user) -> dict:
    from django.test import Client
    from django.urls import reverse

    from ctxsim.analysis.models import InsightsJob

    client = Client()
    client.force_login(user)
    url = f"{reverse('session-insights', args=[row.pk])}?profiles=none&profiles=chatcli"
    page = client.get(url)  # queues both columns (no worker runs them)
    check(page, url)
    if not InsightsJob.objects.filter(session=row).exists():
        raise SystemExit("the insights page queued no column")
    # The page's status element polls its columns' jobs (`ctxsim.jobs.poll`).
    found = re.search(r'<div class="job-poll"[^>]*hx-get="([^"]+)"', page.content.decode())
    if found is None:
        raise SystemExit("the insights page polls no job")
    target = html.unescape(found.group(1))
    polled = client.get(target, headers={**POLL, "HX-Current-URL": f"http://testserver{url}"})
    check(polled, target)
    return {"calls": row.model_call_count, "poll_bytes": len(polled.content),
            "jobs": InsightsJob.objects.filter(session=row).count()}


def section_bytes(row, user) -> int:
    """The section a poll used to resend, every column stored (computed here, untimed)."""
    from django.test import Client, override_settings
    from django.urls import reverse

    from ctxsim.analysis.models import InsightsJob

    InsightsJob.objects.filter(session=row).delete()
    client = Client()
    client.force_login(user)
    url = f"{reverse('session-insights', args=[row.pk])}?profiles=none&profiles=chatcli"
    with override_settings(CTXSIM_INSIGHTS_INLINE_CALLS=10 * row.model_call_count):
        response = client.get(url, headers=SECTION)
    check(response, url)
    return len(response.content)


def worker_memory(folder: str, env: dict, row) -> dict:
    from ctxsim.jobs.models import Status
    from ctxsim.replays import background
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.models import BackgroundReplay, ReplayRun
    from ctxsim.replays.services import default_settings

    with idle_worker(env, "replays", "worker-memory-16k") as (worker, idle):
        ReplayRun.objects.filter(session=row).delete()
        REPLAYS.clear()  # this process's copy of the summary too
        queued = background.pending_for(row, default_settings(row))
        if queued is None:
            raise SystemExit("the replay was not handed to the worker")
        start = time.perf_counter()
        while True:
            state = BackgroundReplay.objects.get(pk=queued.pk)
            if state.status in (Status.DONE, Status.FAILED):
                break
            if time.perf_counter() - start > TIMEOUT_SECONDS:
                raise RuntimeError("the background replay did not finish")
            time.sleep(0.5)
        if state.status != Status.DONE:
            raise RuntimeError(f"the background replay failed: {state.message}")
        took = time.perf_counter() - start
        time.sleep(1.0)  # the task's end: what it let go shows in the current RSS
        peak = status_kib(worker.pid, "VmHWM") * 1024
        after = status_kib(worker.pid, "VmRSS") * 1024
    return {"calls": row.model_call_count, "bytes": row.total_bytes, "idle": idle,
            "peak": peak, "after": after, "seconds": took}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["pages", "replay", "poll", "worker-memory"])
    parser.add_argument("calls", help="comma-separated session sizes, e.g. 2000,16000")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sizes = [int(n) for n in args.calls.split(",")]
    folder = tempfile.mkdtemp(prefix="ctxsim-bench-scale-")
    try:
        extra = {"LOG_LEVEL": "ERROR"}
        if args.mode == "worker-memory":
            extra["CTXSIM_INLINE_REPLAY_CALLS"] = "0"  # the page hands the replay to the worker
        else:  # the bench's own requests replay inline, whatever the size
            extra["CTXSIM_INLINE_REPLAY_CALLS"] = str(max(sizes))
        if args.mode == "poll":
            extra["CTXSIM_INSIGHTS_INLINE_CALLS"] = "0"
        env, (_, user, rows) = prepared(folder, sizes, args.seed, extra)
        if args.mode != "worker-memory":  # (a real worker, which does it itself)
            calm_collector()  # as gunicorn's master and the task worker do before forking
        if args.mode == "pages":
            emit({"sizes": [pages(row, user, args.reps) for row in rows]})
        elif args.mode == "replay":
            emit({"sizes": [replay(row, args.reps) for row in rows]})
        elif args.mode == "poll":
            result = poll(rows[0], user)
            emit({**result, "section_bytes": section_bytes(rows[0], user)})
        else:
            emit(worker_memory(folder, env, rows[0]))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
