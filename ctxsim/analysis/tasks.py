"""Background sweeps: the worker's side (Django's `django.tasks`, run by `manage.py db_worker`).

`services` creates sweeps and imports this module (a small sweep runs `run_sweep_job` in the
request); nothing here imports `services`.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.http import QueryDict
from django.tasks import task
from django.utils import timezone

from ctxsim.analysis.choices import cache_choice, price_text
from ctxsim.analysis.models import Sweep
from ctxsim.analysis.results import insights_for
from ctxsim.insights import sweep as sweeps
from ctxsim.replays import services as replays
from ctxsim.replays.state import settings_from_query

logger = logging.getLogger(__name__)


@task(queue_name="sweeps")
def run_sweep(sweep_id: int) -> dict:
    """Replay every combination of a stored sweep; the row records progress and points."""
    return run_sweep_job(sweep_id)


class _StopRequest:
    """Whether the worker process was asked to stop (SIGTERM, SIGINT) while a sweep ran.

    django-tasks-db's worker finishes its current task before it exits; a sweep of hundreds
    of replays would hold a deploy for many minutes. So while a sweep runs in the main thread
    the signal is also noted here (the worker's own handler still runs), and the sweep stops
    between two points, keeps what it computed and is queued again."""

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
    earlier, stopped run computed are kept; each point's insights are stored results
    (`ctxsim.analysis.results`), shared with the cache & information-loss page."""
    sweep = Sweep.objects.select_related("session__team").get(pk=sweep_id)
    if sweep.status not in (Sweep.Status.QUEUED, Sweep.Status.RUNNING):
        return {"status": sweep.status}
    earlier = [sweeps.point_from_dict(p) for p in sweep.points or []]
    Sweep.objects.filter(pk=sweep.pk).update(status=Sweep.Status.RUNNING, done=len(earlier))
    stop = _StopRequest()
    try:
        settings, _ = settings_from_query(QueryDict(sweep.query), sweep.session.team)
        cache, _ = cache_choice(sweep.cache | {"price": price_text(sweep.cache)})
        rule = cache.rule()
        canonical = replays.canonical_session(sweep.session, settings.counter)
        source = sweeps.SweepInput(canonical.messages, settings.profile, settings.stages,
                                   settings.config, canonical.tools, canonical.response_schema)
        axes = [sweeps.Axis(a["name"], tuple(a["values"])) for a in sweep.axes]

        def progress(done: int, total: int) -> None:
            Sweep.objects.filter(pk=sweep.pk).update(done=done, total=total)

        def analysed(point):
            point_settings = settings.with_config(sweeps.with_point(settings.config, point))
            return insights_for(sweep.session, point_settings, rule, canonical)

        with stop.listening():
            points = sweeps.run_sweep(source, axes, rule, progress, analysed=analysed,
                                      should_stop=stop, done=earlier)
    except sweeps.SweepStopped as stopped:
        logger.warning("sweep %s stopped after %s points; queued again", sweep.pk,
                       len(stopped.points))
        Sweep.objects.filter(pk=sweep.pk).update(
            status=Sweep.Status.QUEUED, points=[p.as_dict() for p in stopped.points],
            done=len(stopped.points))
        result = run_sweep.enqueue(sweep.pk)
        Sweep.objects.filter(pk=sweep.pk).update(task_id=str(result.id)[:64])
        return {"status": "stopped", "points": len(stopped.points)}
    except Exception as exc:
        logger.exception("sweep %s failed", sweep.pk)
        Sweep.objects.filter(pk=sweep.pk).update(
            status=Sweep.Status.FAILED, message=str(exc)[:2000], finished_at=timezone.now())
        return {"status": "failed"}
    Sweep.objects.filter(pk=sweep.pk).update(
        status=Sweep.Status.DONE, points=[p.as_dict() for p in points],
        done=len(points), finished_at=timezone.now())
    return {"status": "done", "points": len(points)}
