"""A worker asked to stop (SIGTERM) stops a sweep between two points (issue 21): the points
computed so far are kept, the sweep is queued again, and the next worker finishes it without
computing those points again."""

from __future__ import annotations

import os
import signal

import pytest
from django.core.management import call_command
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.analysis import tasks
from ctxsim.analysis.models import SessionResult, Sweep

FORM = {"profile": "aivax", "param1": "toolContextCount", "start1": "1", "stop1": "3",
        "step1": "1", "param2": "contextMaximumSize", "start2": "20000", "stop2": "40000",
        "step2": "20000", "model": "gpt-5", "lifetime": "", "price": ""}


@pytest.fixture(autouse=True)
def own_signal_handlers():
    """The worker leaves its handlers installed; the test process gets its own back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def _work() -> None:
    call_command("db_worker", "--batch", "--queue-name", "*", "--no-startup-delay",
                 "--no-reload", verbosity=0)


@pytest.mark.django_db(transaction=True)
def test_sigterm_stops_a_sweep_between_points_and_the_next_worker_resumes_it(
    personas, long_session, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.CTXSIM_INLINE_SWEEP_WORK = 10  # to the worker
    with django_capture_on_commit_callbacks(execute=True):
        personas.client("owner").post(reverse("sweep-create", args=[long_session.pk]), FORM)
    sweep = Sweep.objects.get()
    real = tasks.insights_for
    computed = []

    def then_sigterm(*args, **kwargs):
        result = real(*args, **kwargs)
        computed.append(args[1].key)
        if len(computed) == 2:  # the deploy stops the worker during the second point
            os.kill(os.getpid(), signal.SIGTERM)
        return result

    monkeypatch.setattr(tasks, "insights_for", then_sigterm)
    _work()
    sweep.refresh_from_db()
    assert sweep.status == "queued"
    assert sweep.done == 2 and len(sweep.points) == 2  # stopped before the third point
    assert DBTaskResult.objects.filter(status="READY").count() == 1  # queued again
    # The sweep's listener is gone again: the worker's own handler is back in place.
    assert signal.getsignal(signal.SIGTERM).__name__ == "shutdown"

    _work()
    sweep.refresh_from_db()
    assert sweep.status == "done" and sweep.done == 6 and len(sweep.points) == 6
    assert len(computed) == 6  # the first two points were not computed again
    assert len(set(computed)) == 6
    assert sum(p["front"] for p in sweep.points) >= 1
    assert SessionResult.objects.filter(session=long_session).count() == 6
