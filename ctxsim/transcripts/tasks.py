"""Background tasks (Django's `django.tasks`, run by `manage.py db_worker`)."""

from __future__ import annotations

from django.tasks import task

from ctxsim.transcripts import services


@task
def run_import(job_id: int, attempt: int | None = None) -> dict:
    """Import one stored upload; the job row records progress and the outcome."""
    return services.run_import_job(job_id, attempt)
