"""Background sweeps (Django's `django.tasks`, run by `manage.py db_worker`)."""

from __future__ import annotations

from django.tasks import task

from ctxsim.analysis import services


@task
def run_sweep(sweep_id: int) -> dict:
    """Replay every combination of a stored sweep; the row records progress and points."""
    return services.run_sweep_job(sweep_id)
