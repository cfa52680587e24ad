"""`python manage.py check_stuck_imports`: settle background jobs whose worker went away.

Run it periodically (cron, or a systemd timer) in production: it checks every team's jobs, of
every kind (`ctxsim.jobs.lifecycle.settle`: queued again once, then failed). The
upload page and the job status view check only the jobs they show (from the rows they read
anyway), so a dev setup needs nothing and a page view writes only when a shown job is stuck.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand

from ctxsim.transcripts.services import fail_stuck_jobs, import_timeout


class Command(BaseCommand):
    help = "Mark imports stuck in 'running' past CTXSIM_IMPORT_TIMEOUT_SECONDS as failed."

    def handle(self, *args, **options) -> None:
        count = fail_stuck_jobs()
        seconds = int(import_timeout().total_seconds())
        self.stdout.write(
            f"{count} stuck import{'s' if count != 1 else ''} marked as failed "
            f"(no heartbeat for over {seconds} s)."
        )
