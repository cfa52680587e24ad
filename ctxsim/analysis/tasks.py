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
from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings as django_settings
from django.db.models import Q
from django.http import QueryDict
from django.tasks import task
from django.utils import timezone

from ctxsim.analysis.choices import cache_choice, price_text
from ctxsim.analysis.models import Sweep
from ctxsim.heartbeat import Heartbeat
from ctxsim.insights import sweep as sweeps
from ctxsim.replays import services as replays
from ctxsim.replays.state import settings_from_query

logger = logging.getLogger(__name__)

HEARTBEAT_EVERY = 5.0
DEFAULT_SWEEP_TIMEOUT_SECONDS = 600


class SweepStopped(Exception):
    """The sweep stopped being running while it ran (cancelled, or given up as stuck)."""


@task(queue_name="sweeps")
def run_sweep(sweep_id: int) -> dict:
    """Replay every combination of a stored sweep; the row records progress and points."""
    return run_sweep_job(sweep_id)


def run_sweep_job(sweep_id: int) -> dict:
    """Run a stored sweep, saving progress after every point (the page polls it)."""
    fail_stuck_sweeps()  # a worker that died left its sweeps "running": settle them first
    sweep = Sweep.objects.select_related("session__team").get(pk=sweep_id)
    if sweep.status not in (Sweep.Status.QUEUED, Sweep.Status.RUNNING):
        return {"status": sweep.status}
    claimed = Sweep.objects.filter(pk=sweep.pk, status__in=(
        Sweep.Status.QUEUED, Sweep.Status.RUNNING)).update(
        status=Sweep.Status.RUNNING, done=0, heartbeat_at=timezone.now())
    if not claimed:
        return {"status": "skipped"}
    running = Sweep.objects.filter(pk=sweep.pk, status=Sweep.Status.RUNNING)
    beat = running.update
    with Heartbeat(lambda: beat(heartbeat_at=timezone.now()), HEARTBEAT_EVERY,
                   f"sweep-{sweep.pk}-heartbeat"):
        return _run(sweep, running)


def _run(sweep: Sweep, running) -> dict:
    try:
        settings, _ = settings_from_query(QueryDict(sweep.query), sweep.session.team)
        cache, _ = cache_choice(sweep.cache | {"price": price_text(sweep.cache)})
        canonical = replays.canonical_session(sweep.session)
        source = sweeps.SweepInput(canonical.messages, settings.profile, settings.stages,
                                   settings.config, canonical.tools, canonical.response_schema)
        axes = [sweeps.Axis(a["name"], tuple(a["values"])) for a in sweep.axes]

        def progress(done: int, total: int) -> None:
            if not running.update(done=done, total=total, heartbeat_at=timezone.now()):
                raise SweepStopped

        points = sweeps.run_sweep(source, axes, cache.rule(), progress)
    except SweepStopped:
        return {"status": "cancelled"}
    except Exception as exc:
        logger.exception("sweep %s failed", sweep.pk)
        running.update(status=Sweep.Status.FAILED, message=str(exc)[:2000],
                       finished_at=timezone.now())
        return {"status": "failed"}
    if not running.update(status=Sweep.Status.DONE, points=[p.as_dict() for p in points],
                          done=len(points), finished_at=timezone.now()):
        return {"status": "cancelled"}
    return {"status": "done", "points": len(points)}


def sweep_timeout() -> timedelta:
    return timedelta(seconds=getattr(django_settings, "CTXSIM_SWEEP_TIMEOUT_SECONDS",
                                     DEFAULT_SWEEP_TIMEOUT_SECONDS))


def fail_stuck_sweeps(now=None, *, among: Iterable[Sweep] | None = None) -> int:
    """Mark running sweeps whose heartbeat stopped for longer than the timeout as failed,
    saying how far they got. `among`: only these (already read) sweeps, with no query unless
    one of them really is stuck (a page polling every second must not write each time)."""
    now = now or timezone.now()
    cutoff = now - sweep_timeout()
    if among is None:
        ids = list(Sweep.objects.filter(status=Sweep.Status.RUNNING).filter(
            Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)
        ).values_list("pk", flat=True))
    else:
        ids = [s.pk for s in among if s.status == Sweep.Status.RUNNING
               and (s.heartbeat_at or s.created_at) < cutoff]
    settled = 0
    minutes = max(1, int(sweep_timeout().total_seconds() // 60))
    for sweep in Sweep.objects.filter(pk__in=ids, status=Sweep.Status.RUNNING):
        settled += Sweep.objects.filter(pk=sweep.pk, status=Sweep.Status.RUNNING).update(
            status=Sweep.Status.FAILED, finished_at=now,
            message=(f"the sweep stopped after {sweep.done} of {sweep.total} combinations (no "
                     f"progress for over {minutes} min; was the worker stopped?); start it "
                     "again to finish"),
        )
    return settled


def cancel_sweep(sweep: Sweep, user) -> bool:
    """Stop a queued or running sweep; the worker stops at its next point. False when it had
    already ended."""
    who = getattr(user, "username", "") or "someone"
    return bool(Sweep.objects.filter(
        pk=sweep.pk, status__in=(Sweep.Status.QUEUED, Sweep.Status.RUNNING)).update(
        status=Sweep.Status.FAILED, finished_at=timezone.now(),
        message=f"cancelled by {who} after {sweep.done} of {sweep.total} combinations"))
