"""Background sweeps: the worker's side (Django's `django.tasks`, run by `manage.py db_worker`).

`services` creates sweeps and imports this module (a small sweep runs `run_sweep_job` in the
request); nothing here imports `services`.

A sweep never sits "running" after its worker died, and stops when cancelled (issue 20 item
12): a thread beats its heartbeat through every point, every write of progress or outcome
applies only while it is still running (a cancel or a give-up wins), and each sweep the worker
starts first settles the stuck ones (`fail_stuck_sweeps`, also run when a page shows one).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings as django_settings
from django.http import QueryDict
from django.tasks import task
from django.utils import timezone

from ctxsim.analysis.choices import cache_choice, price_text
from ctxsim.analysis.models import InsightsJob, Sweep
from ctxsim.analysis.results import insights_for
from ctxsim.heartbeat import Heartbeat
from ctxsim.insights import sweep as sweeps
from ctxsim.jobs import lifecycle
from ctxsim.replays import services as replays
from ctxsim.replays.cache import releases_memory
from ctxsim.replays.state import session_settings

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0
DEFAULT_SWEEP_TIMEOUT_SECONDS = 600
DEFAULT_INSIGHTS_JOB_TIMEOUT_SECONDS = 3600


# The phases of a running sweep, as its row shows them (`phase_of`). A worker killed in any
# of them leaves a sweep that recovery settles as failed, saying how far it got
# (`fail_stuck_sweeps`; the kill tests stop a real worker at each phase of this list, in
# tests/web/test_sweep_jobs.py).
CLAIMED = "claimed"  # running, no point computed yet
BETWEEN_POINTS = "between points"  # some of the points computed
ALL_COMPUTED = "all points computed"  # every point computed, the result not yet written
PHASES = (CLAIMED, BETWEEN_POINTS, ALL_COMPUTED)


def phase_of(sweep: Sweep) -> str | None:
    """The phase a running sweep is in, by its row (None when it is not running)."""
    if sweep.status != Sweep.Status.RUNNING:
        return None
    if not sweep.done:
        return CLAIMED
    return ALL_COMPUTED if sweep.done >= sweep.total else BETWEEN_POINTS


class SweepStopped(Exception):
    """The sweep stopped being running while it ran (cancelled, or given up as stuck)."""


@task(queue_name="sweeps")
def run_sweep(sweep_id: int) -> dict:
    """Replay every combination of a stored sweep; the row records progress and points."""
    return run_sweep_job(sweep_id)


@task(queue_name="replays")
@releases_memory
def compute_insights(job_id: int) -> dict:
    """One cache & information-loss column too long for a request (issue 20 item 5)."""
    return compute_insights_job(job_id)


def compute_insights_job(job_id: int) -> dict:
    """Compute and store the job's insights report (`SessionResult.data`), beating its
    heartbeat, then end the job done (the page polling it, `ctxsim.jobs.poll`, then loads the
    result); on an error the job says why."""
    every = min(HEARTBEAT_EVERY, insights_timeout().total_seconds() / 4)
    return lifecycle.run(InsightsJob, _insights, every=every, pk=job_id)


def _insights(job: InsightsJob, attempt: lifecycle.Attempt) -> dict:
    settings, _ = session_settings(QueryDict(job.query), job.session)
    cache, _ = cache_choice(job.cache | {"price": price_text(job.cache)})
    insights_for(job.session, settings, cache.rule())
    attempt.finish(InsightsJob.Status.DONE)
    return {"status": "done"}


def enqueue_insights(job: InsightsJob) -> None:
    """The job's task (first queued, or queued again)."""
    result = compute_insights.enqueue(job.pk)
    InsightsJob.objects.filter(pk=job.pk).update(task_id=str(result.id)[:64])


class _StopRequest:
    """Whether the worker process was asked to stop (SIGTERM, SIGINT) while a sweep ran.

    django-tasks-db's worker finishes its current task before it exits; a sweep of hundreds
    of replays would hold a deploy for many minutes. So while a sweep runs in the main thread
    the signal is also noted here (the worker's own handler still runs), and the sweep stops
    between two points, keeps what it computed and is queued again (issue 21)."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self) -> bool:
        return self.requested

    @contextmanager
    def listening(self) -> Iterator[_StopRequest]:
        if threading.current_thread() is not threading.main_thread():
            yield self  # signals reach the main thread only (tests, inline sweeps)
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

        def note(signum, frame) -> None:
            self.requested = True
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL and signum == signal.SIGINT:
                raise KeyboardInterrupt

        for sig in previous:
            signal.signal(sig, note)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_sweep_job(sweep_id: int) -> dict:
    """Run a stored sweep, saving progress after every point (the page polls it). Points an
    earlier run stopped by a signal computed are kept; each point's insights are stored
    results (`ctxsim.analysis.results`), shared with the cache & information-loss page."""
    fail_stuck_sweeps()  # a worker that died left its sweeps "running": settle them first
    sweep = Sweep.objects.select_related("session__team").get(pk=sweep_id)
    if sweep.status not in (Sweep.Status.QUEUED, Sweep.Status.RUNNING):
        return {"status": sweep.status}
    claimed = Sweep.objects.filter(pk=sweep.pk, status__in=(
        Sweep.Status.QUEUED, Sweep.Status.RUNNING)).update(
        status=Sweep.Status.RUNNING, done=len(sweep.points or []), heartbeat_at=timezone.now())
    if not claimed:
        return {"status": "skipped"}
    running = Sweep.objects.filter(pk=sweep.pk, status=Sweep.Status.RUNNING)
    beat = running.update
    every = min(HEARTBEAT_EVERY, sweep_timeout().total_seconds() / 4)  # however short it is
    with Heartbeat(lambda: beat(heartbeat_at=timezone.now()), every,
                   f"sweep-{sweep.pk}-heartbeat"):
        return _run(sweep, running)


def _run(sweep: Sweep, running) -> dict:
    try:
        settings, _ = session_settings(QueryDict(sweep.query), sweep.session)
        cache, _ = cache_choice(sweep.cache | {"price": price_text(sweep.cache)})
        rule = cache.rule()
        canonical = replays.canonical_session(sweep.session, settings.counter)
        earlier = [sweeps.point_from_dict(p) for p in sweep.points or []]
        source = sweeps.SweepInput(canonical.messages, settings.profile, settings.stages,
                                   settings.config, canonical.tools, canonical.response_schema,
                                   canonical.format, canonical.meta)
        axes = [sweeps.Axis(a["name"], tuple(a["values"])) for a in sweep.axes]

        def progress(done: int, total: int) -> None:
            if not running.update(done=done, total=total, heartbeat_at=timezone.now()):
                raise SweepStopped

        def analysed(point):
            point_settings = settings.with_config(sweeps.with_point(settings.config, point))
            return insights_for(sweep.session, point_settings, rule, canonical)

        stop = _StopRequest()
        with stop.listening():
            points = sweeps.run_sweep(source, axes, rule, progress, analysed=analysed,
                                      should_stop=stop, done=earlier)
    except SweepStopped:
        return {"status": "cancelled"}
    except sweeps.SweepPaused as paused:
        logger.warning("sweep %s stopped by a signal after %s points; queued again", sweep.pk,
                       len(paused.points))
        if not running.update(status=Sweep.Status.QUEUED, done=len(paused.points),
                              points=[p.as_dict() for p in paused.points]):
            return {"status": "cancelled"}
        enqueue(sweep)
        return {"status": "stopped", "points": len(paused.points)}
    except Exception as exc:
        logger.exception("sweep %s failed", sweep.pk)
        running.update(status=Sweep.Status.FAILED, message=str(exc)[:2000],
                       finished_at=timezone.now())
        return {"status": "failed"}
    if not running.update(status=Sweep.Status.DONE, points=[p.as_dict() for p in points],
                          done=len(points), finished_at=timezone.now()):
        return {"status": "cancelled"}
    return {"status": "done", "points": len(points)}


def insights_timeout() -> timedelta:
    """An insights job silent this long lost its worker; one that failed is tried again after
    it (CTXSIM_INSIGHTS_JOB_TIMEOUT_SECONDS)."""
    return timedelta(seconds=getattr(django_settings, "CTXSIM_INSIGHTS_JOB_TIMEOUT_SECONDS",
                                     DEFAULT_INSIGHTS_JOB_TIMEOUT_SECONDS))


def sweep_timeout() -> timedelta:
    return timedelta(seconds=getattr(django_settings, "CTXSIM_SWEEP_TIMEOUT_SECONDS",
                                     DEFAULT_SWEEP_TIMEOUT_SECONDS))


def fail_stuck_sweeps(now=None, *, among: Iterable[Sweep] | None = None) -> int:
    """Settle running sweeps whose heartbeat stopped for longer than the timeout, as every
    kind of job (`ctxsim.jobs.lifecycle.settle`): queued again once (the points it computed
    are stored results, so the next run is quicker), then failed saying how far it got.
    `among`: only these (already read) sweeps, with no query unless one of them really is
    stuck (a page polling every second must not write each time)."""
    return lifecycle.settle(now, among=among)


def last_word(job, why: str) -> bool:
    """A sweep lost after its retry: failed, saying how far it got."""
    sweep = Sweep.objects.get(pk=job.pk)
    minutes = max(1, int(sweep_timeout().total_seconds() // 60))
    return lifecycle.fail(sweep, (
        f"the sweep stopped after {sweep.done} of {sweep.total} combinations (no progress "
        f"for over {minutes} min; was the worker stopped?); start it again to finish"))


def enqueue(sweep) -> None:
    result = run_sweep.enqueue(sweep.pk)
    Sweep.objects.filter(pk=sweep.pk).update(task_id=str(result.id)[:64])


def cancel_sweep(sweep: Sweep, user) -> bool:
    """Stop a queued or running sweep; the worker stops at its next point. False when it had
    already ended."""
    who = getattr(user, "username", "") or "someone"
    return bool(Sweep.objects.filter(
        pk=sweep.pk, status__in=(Sweep.Status.QUEUED, Sweep.Status.RUNNING)).update(
        status=Sweep.Status.FAILED, finished_at=timezone.now(),
        message=f"cancelled by {who} after {sweep.done} of {sweep.total} combinations"))
