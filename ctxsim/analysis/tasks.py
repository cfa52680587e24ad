"""Background sweeps: the worker's side (Django's `django.tasks`, run by `manage.py db_worker`).

`services` creates sweeps and imports this module (a small sweep runs `run_sweep_job` in the
request); nothing here imports `services`.
"""

from __future__ import annotations

import logging

from django.http import QueryDict
from django.tasks import task
from django.utils import timezone

from ctxsim.analysis.choices import cache_choice, price_text
from ctxsim.analysis.models import Sweep
from ctxsim.insights import sweep as sweeps
from ctxsim.replays import services as replays
from ctxsim.replays.state import settings_from_query

logger = logging.getLogger(__name__)


@task(queue_name="sweeps")
def run_sweep(sweep_id: int) -> dict:
    """Replay every combination of a stored sweep; the row records progress and points."""
    return run_sweep_job(sweep_id)


def run_sweep_job(sweep_id: int) -> dict:
    """Run a stored sweep, saving progress after every point (the page polls it)."""
    sweep = Sweep.objects.select_related("session__team").get(pk=sweep_id)
    if sweep.status not in (Sweep.Status.QUEUED, Sweep.Status.RUNNING):
        return {"status": sweep.status}
    Sweep.objects.filter(pk=sweep.pk).update(status=Sweep.Status.RUNNING, done=0)
    try:
        settings, _ = settings_from_query(QueryDict(sweep.query), sweep.session.team)
        cache, _ = cache_choice(sweep.cache | {"price": price_text(sweep.cache)})
        canonical = replays.canonical_session(sweep.session)
        source = sweeps.SweepInput(canonical.messages, settings.profile, settings.stages,
                                   settings.config, canonical.tools, canonical.response_schema)
        axes = [sweeps.Axis(a["name"], tuple(a["values"])) for a in sweep.axes]

        def progress(done: int, total: int) -> None:
            Sweep.objects.filter(pk=sweep.pk).update(done=done, total=total)

        points = sweeps.run_sweep(source, axes, cache.rule(), progress)
    except Exception as exc:
        logger.exception("sweep %s failed", sweep.pk)
        Sweep.objects.filter(pk=sweep.pk).update(
            status=Sweep.Status.FAILED, message=str(exc)[:2000], finished_at=timezone.now())
        return {"status": "failed"}
    Sweep.objects.filter(pk=sweep.pk).update(
        status=Sweep.Status.DONE, points=[p.as_dict() for p in points],
        done=len(points), finished_at=timezone.now())
    return {"status": "done", "points": len(points)}
