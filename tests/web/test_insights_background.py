"""Issue 20 item 5: the cache & information-loss page serves stored results whatever the
session's size, hands what a request should not compute to the task worker (once per session,
settings and rule) and polls, and refuses past a hard bound."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from ctxsim.analysis import results
from ctxsim.analysis.models import InsightsJob, SessionResult
from ctxsim.analysis.tasks import compute_insights_job
from ctxsim.insights.prices import cache_rule
from ctxsim.replays.state import settings_from_query


def url(row, query: str = "profiles=chatcli") -> str:
    return f"{reverse('session-insights', args=[row.pk])}?{query}"


def _refuse(*args, **kwargs):
    raise AssertionError("computed in the request")


def test_a_stored_result_is_shown_for_a_session_over_every_bound(personas, long_session,
                                                                 settings, monkeypatch):
    """The bound was checked before the lookup: a stored result of a long session was refused.
    """
    chatcli, _ = settings_from_query({"profile": "chatcli"}, personas.team)
    results.insights_for(long_session, chatcli, cache_rule())  # a visit or a sweep stored it
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    settings.CTXSIM_INSIGHTS_MAX_CALLS = long_session.model_call_count - 1
    monkeypatch.setattr(results, "replay", _refuse)
    client = personas.client("viewer")
    body = client.get(url(long_session)).content.decode()
    assert 'data-profile="chatcli"' in body and "too long" not in body
    assert "every 2s" not in body and not InsightsJob.objects.exists()
    # Beside it, one more profile would pass the hard bound: refused, the stored one shown.
    body = client.get(url(long_session, "profiles=chatcli&profiles=aivax")).content.decode()
    assert 'data-profile="chatcli"' in body and "too long" in body
    assert not InsightsJob.objects.exists() and not DBTaskResult.objects.exists()


def test_a_long_session_is_queued_once_and_the_page_polls(personas, long_session, settings,
                                                         monkeypatch,
                                                         django_capture_on_commit_callbacks):
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = long_session.model_call_count - 1
    monkeypatch.setattr(results, "replay", _refuse)
    with django_capture_on_commit_callbacks(execute=True):
        assert personas.client("outsider").get(url(long_session)).status_code == 404
        assert not InsightsJob.objects.exists()
        client = personas.client("viewer")
        first = client.get(url(long_session))
        again = client.get(url(long_session), headers={"HX-Request": "true",
                                                       "HX-Target": "insights"})
    for response in (first, again):
        body = response.content.decode()
        assert response.status_code == 200
        assert 'data-profile-pending="chatcli"' in body and 'hx-trigger="every 2s"' in body
        assert 'data-profile="chatcli"' not in body
    assert "<html" not in again.content.decode()  # the polled partial
    job = InsightsJob.objects.get()
    task = DBTaskResult.objects.get()  # the second visit queued nothing more
    assert task.queue_name == "replays" and task.args_kwargs["args"] == [job.pk]
    assert job.task_id == str(task.id) and job.status == InsightsJob.Status.QUEUED
    assert not SessionResult.objects.exists()


# The real db_worker closes its database connections after each task; inside a test
# transaction that would break PostgreSQL's connection, so this test commits for real.
@pytest.mark.django_db(transaction=True)
def test_the_worker_stores_the_result_and_the_next_visit_shows_it(
        personas, long_session, settings, django_capture_on_commit_callbacks):
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = long_session.model_call_count - 1
    client = personas.client("viewer")
    with django_capture_on_commit_callbacks(execute=True):
        assert "every 2s" in client.get(url(long_session)).content.decode()
    call_command("db_worker", "--batch", "--queue-name", "replays", "--no-startup-delay",
                 "--no-reload", verbosity=0)
    assert SessionResult.objects.filter(session=long_session).count() == 1
    assert InsightsJob.objects.get().status == InsightsJob.Status.DONE  # its poll loads it
    body = client.get(url(long_session)).content.decode()
    assert 'data-profile="chatcli"' in body and "every 2s" not in body
    assert "data-profile-pending" not in body
    assert personas.client("outsider").get(url(long_session)).status_code == 404


def test_a_failed_job_says_why_stops_polling_and_is_queued_again_after_the_timeout(
        personas, long_session, settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    client = personas.client("viewer")
    with django_capture_on_commit_callbacks(execute=True):
        client.get(url(long_session))
    job = InsightsJob.objects.get()

    def broken(*args, **kwargs):
        raise RuntimeError("the replay ran out of memory")

    monkeypatch.setattr(results, "replay", broken)
    assert compute_insights_job(job.pk) == {"status": "failed"}
    assert compute_insights_job(job.pk) == {"status": "skipped"}  # claimed once only
    with django_capture_on_commit_callbacks(execute=True):
        body = client.get(url(long_session)).content.decode()
    assert "the replay ran out of memory" in body and "every 2s" not in body
    assert DBTaskResult.objects.count() == 1  # a recent failure is not retried at each visit
    InsightsJob.objects.update(started_at=timezone.now() - timedelta(hours=2))
    with django_capture_on_commit_callbacks(execute=True):
        body = client.get(url(long_session)).content.decode()
    assert "every 2s" in body and DBTaskResult.objects.count() == 2
    job.refresh_from_db()
    assert job.status == InsightsJob.Status.QUEUED and job.message == ""


def polled(client, job, page: str):
    """A poll of the insights page's jobs, as htmx sends it from the page."""
    return client.get(reverse("job-poll", args=[job.pk]),
                      headers={"HX-Request": "true", "HX-Current-URL": f"http://testserver{page}"})


def test_a_poll_is_a_status_line_that_never_computes_until_every_column_is_stored(
        personas, long_session, settings, monkeypatch, django_capture_on_commit_callbacks):
    """Issue 31: every poll re-rendered (and a last one computed) the whole 5 MB section;
    issue 30: the page polls its columns' jobs at the one poll of every job."""
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    client = personas.client("viewer")
    query = "profiles=chatcli&profiles=none"
    page = url(long_session, query)
    none, _ = settings_from_query({"profile": "none"}, personas.team)
    results.insights_for(long_session, none, cache_rule())  # one column is stored already
    with django_capture_on_commit_callbacks(execute=True):
        first = client.get(page).content.decode()
    job = InsightsJob.objects.get()
    assert 'id="insights-progress"' in first and 'hx-trigger="every 2s"' in first
    assert "1 of 2 column(s) ready" in first and "computing chatcli" in first
    assert f'hx-get="{reverse("job-poll", args=[job.pk])}"' in first
    assert DBTaskResult.objects.count() == 1
    monkeypatch.setattr(results, "replay", _refuse)
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            answer = polled(client, job, page)
        body = answer.content.decode()
        assert answer.status_code == 200 and len(answer.content) < 2048, len(answer.content)
        assert 'data-job-status="queued"' in body and "waiting for the worker" in body
        assert 'hx-trigger="every 2s"' in body and "data-profile" not in body
    assert DBTaskResult.objects.count() == 1  # polls queue nothing either
    chatcli, _ = settings_from_query({"profile": "chatcli"}, personas.team)
    monkeypatch.undo()
    results.insights_for(long_session, chatcli, cache_rule())  # as the worker stores it
    InsightsJob.objects.update(status=InsightsJob.Status.DONE)  # and ends its job
    done = polled(client, job, page).content.decode()
    # Done: the line loads the section once, with the page's own profiles (no poll in it).
    assert 'hx-trigger="load"' in done and 'hx-target="closest .job-region"' in done
    assert f'hx-get="{page.replace("&", "&amp;")}"' in done
    assert "every 2s" not in done and len(done) < 2048
    section = client.get(page, headers={"HX-Request": "true", "HX-Target": "section#insights"})
    assert 'data-profile="chatcli"' in section.content.decode()
    assert "job-poll" not in section.content.decode()
    assert polled(personas.client("outsider"), job, page).status_code == 404


def test_a_done_job_whose_result_is_gone_is_queued_again(
        personas, long_session, settings, django_capture_on_commit_callbacks):
    """A column's job stays as its kind's row once done (its page's poll reads it): should
    its result be gone, the next visit queues the job again instead of waiting for it."""
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    client = personas.client("viewer")
    with django_capture_on_commit_callbacks(execute=True):
        client.get(url(long_session))
    InsightsJob.objects.update(status=InsightsJob.Status.DONE)  # no result stored
    with django_capture_on_commit_callbacks(execute=True):
        body = client.get(url(long_session)).content.decode()
    assert 'data-profile-pending="chatcli"' in body and "every 2s" in body
    assert InsightsJob.objects.get().status == InsightsJob.Status.QUEUED
    assert DBTaskResult.objects.count() == 2


def test_a_column_already_queued_is_not_computed_in_the_request_as_well(
        personas, long_session, settings, monkeypatch, django_capture_on_commit_callbacks):
    """Issue 31: a queued column counted as missing, so once the others were stored its work
    fitted the inline bound and a poll computed it, duplicating the worker."""
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    client = personas.client("viewer")
    with django_capture_on_commit_callbacks(execute=True):
        client.get(url(long_session))
    InsightsJob.objects.update(status=InsightsJob.Status.RUNNING, started_at=timezone.now())
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = long_session.model_call_count * 10
    monkeypatch.setattr(results, "replay", _refuse)
    with django_capture_on_commit_callbacks(execute=True):
        body = client.get(url(long_session)).content.decode()
    assert 'data-profile-pending="chatcli"' in body and 'data-status="running"' in body
    assert DBTaskResult.objects.count() == 1 and not SessionResult.objects.exists()
