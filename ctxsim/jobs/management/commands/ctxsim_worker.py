"""`manage.py ctxsim_worker`: `db_worker` with each task in a child of bounded memory and
busy-database waits (`ctxsim.jobs.worker`). Same options as `db_worker`."""

from __future__ import annotations

from django.core.management.base import CommandError
from django_tasks_db.management.commands import db_worker

from ctxsim.jobs.worker import BoundedWorker


class Command(db_worker.Command):
    help = "Run ctxsim's background task worker (db_worker, one bounded child per task)"

    def handle(self, *, verbosity: int, queue_name: str, interval: float, batch: bool,
               backend_name: str, startup_delay: bool, reload: bool, max_tasks: int | None,
               worker_id: str, exclude_queues: str, **options) -> None:
        self.configure_logging(verbosity)
        queue_names = queue_name.split(",")
        excluded = exclude_queues.split(",") if exclude_queues else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        worker = BoundedWorker(
            queue_names=queue_names, interval=interval, batch=batch,
            backend_name=backend_name, startup_delay=startup_delay, max_tasks=max_tasks,
            worker_id=worker_id, excluded_queue_names=excluded)
        worker.configure_signals()
        worker.run()
