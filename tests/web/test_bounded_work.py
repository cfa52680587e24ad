"""Issue 28 items 2 and 4, acceptance 3: with CTXSIM_INLINE_REPLAY_CALLS low, compare, the
trace download and the API trace of a longer session never replay inside the request (the
worker does); full traces are bounded by an estimate before any replay and by the temp space;
a newer threshold of the same user supersedes their queued replay (issue 31)."""

from __future__ import annotations

import json
from collections import namedtuple

import pytest
from django.test import Client
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.jobs import policy
from ctxsim.jobs.models import Status, TraceFile
from ctxsim.replays import background, services, traces
from ctxsim.replays.cache import REPLAYS
from ctxsim.replays.models import BackgroundReplay, ReplayRun
from ctxsim.replays.state import settings_from_query
from tests.factories import bearer, body_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def long(settings, long_session, tmp_path):
    settings.CTXSIM_INLINE_REPLAY_CALLS = 5
    settings.MEDIA_ROOT = tmp_path / "media"
    REPLAYS.clear()
    return long_session


@pytest.fixture
def no_replay(monkeypatch):
    """A request that replays fails the test."""
    def refused(*args, **kwargs):
        raise AssertionError("a request replayed the session")

    monkeypatch.setattr(services, "replay", refused)
    return monkeypatch


def run_worker_tasks() -> int:
    """What the worker does, in this process (each queued task, in order)."""
    from django.tasks import task_backends  # noqa: F401 (the backend resolves task paths)
    from django.utils.module_loading import import_string

    ran = 0
    for row in DBTaskResult.objects.filter(status="READY").order_by("enqueued_at"):
        import_string(row.task_path).call(*row.args_kwargs["args"])
        DBTaskResult.objects.filter(pk=row.pk).update(status="SUCCESSFUL")
        ran += 1
    return ran


def test_compare_of_a_long_session_hands_both_replays_to_the_worker(personas, long,
                                                                    monkeypatch):
    url = reverse("session-compare", args=[long.pk]) + "?b=none"
    viewer = personas.client("viewer")
    with monkeypatch.context() as patch:
        patch.setattr(services, "replay", lambda *a, **k: pytest.fail("replayed in request"))
        first = viewer.get(url)
        assert first.status_code == 202 and "Replaying in the background" in first.content.decode()
        assert not ReplayRun.objects.exists()
        # Both sides at once, neither superseding the other.
        assert BackgroundReplay.objects.filter(status=Status.QUEUED).count() == 2
    while run_worker_tasks():  # the worker replays both sides
        with monkeypatch.context() as patch:
            patch.setattr(services, "replay", lambda *a, **k: pytest.fail("replayed"))
            REPLAYS.clear()  # another web process: nothing kept from the worker's replays
            page = viewer.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert "open this call on the session page" in html
    assert BackgroundReplay.objects.filter(status=Status.DONE).count() == 2


def test_the_api_trace_of_a_long_session_is_written_by_the_worker(personas, long, api_tokens,
                                                                  monkeypatch):
    path = f"/api/v1/sessions/{long.pk}/trace?profile=chatcli"
    with monkeypatch.context() as patch:
        patch.setattr(services, "replay", lambda *a, **k: pytest.fail("replayed in request"))
        waiting = Client().get(path, **bearer(api_tokens.read))
        assert waiting.status_code == 202 and waiting["Retry-After"] == "2"
        assert waiting.json()["status"] == "queued"
        again = Client().get(path, **bearer(api_tokens.read))  # joins the queued one
        assert again.status_code == 202
    assert TraceFile.objects.count() == 1 and DBTaskResult.objects.count() == 1
    run_worker_tasks()
    with monkeypatch.context() as patch:
        patch.setattr(services, "replay", lambda *a, **k: pytest.fail("replayed in request"))
        done = Client().get(path, **bearer(api_tokens.read))
        assert done.status_code == 200
        trace = json.loads(body_of(done))
    settings, _ = settings_from_query({"profile": "chatcli"}, long.team)
    assert trace == json.loads(services.trace_json(long, settings))


def test_the_trace_download_of_a_long_session_waits_for_the_worker(personas, long, no_replay):
    url = reverse("session-trace", args=[long.pk]) + "?profile=chatcli&summary=0"
    viewer = personas.client("viewer")
    waiting = viewer.get(url)
    assert waiting.status_code == 202
    assert "Writing the trace in the background" in waiting.content.decode()
    row = TraceFile.objects.get()  # the page polls its job; no meta refresh but for noscript
    poll = reverse("job-poll", args=[row.pk])
    assert f'hx-get="{poll}"' in waiting.content.decode()
    assert '<noscript><meta http-equiv="refresh"' in waiting.content.decode()
    no_replay.undo()
    run_worker_tasks()
    assert viewer.get(poll, headers={"HX-Request": "true"})["HX-Refresh"] == "true"
    done = viewer.get(url)
    assert done.status_code == 200 and done["Content-Disposition"].startswith("attachment")
    assert json.loads(body_of(done))["calls"]


@pytest.mark.parametrize("where", ["page", "api"])
def test_a_full_trace_over_its_bound_is_a_413_with_the_size_and_the_summary(
        personas, long_session, api_tokens, settings, monkeypatch, where):
    settings.CTXSIM_TRACE_MAX_BYTES = 200_000
    # The summary is replayed to measure the trace (a short session); the trace never.
    monkeypatch.setattr(traces.services, "trace_file",
                        lambda *a, **k: pytest.fail("the trace was written"))
    if where == "page":
        response = personas.client("viewer").get(
            reverse("session-trace", args=[long_session.pk]), {"summary": "0"})
        body = response.content.decode()
    else:
        response = Client().get(f"/api/v1/sessions/{long_session.pk}/trace",
                                **bearer(api_tokens.read))
        body = response.json()["detail"] + " " + response.json()["summary_url"]
        assert response.json()["estimate_bytes"] > 200_000
    assert response.status_code == 413
    assert "would be about" in body and "CTXSIM_TRACE_MAX_BYTES" in body
    assert "summary=1" in body
    assert not TraceFile.objects.exists()


def test_a_trace_without_the_temp_space_is_refused_before_it_is_written(
        personas, long_session, monkeypatch, no_replay):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(traces.shutil, "disk_usage", lambda path: usage(10**9, 10**9, 1000))
    response = personas.client("viewer").get(
        reverse("session-trace", args=[long_session.pk]), {"summary": "0"})
    assert response.status_code == 507
    assert "temporary space" in response.content.decode()


def test_the_estimate_is_not_below_the_trace_written(personas, long_session):
    settings, _ = settings_from_query({"profile": "chatcli"}, long_session.team)
    for summary in (False, True):
        written = len(services.trace_json(long_session, settings, summary=summary).encode())
        assert traces.estimate_bytes(long_session, settings, summary) >= written
    services.summary_for(long_session, settings)  # from the stored summary now
    written = len(services.trace_json(long_session, settings).encode())
    estimate = traces.estimate_bytes(long_session, settings, False)
    assert written <= estimate < 20 * written


def test_a_newer_threshold_of_the_same_user_drops_their_queued_replay(personas, long):
    page = reverse("session-detail", args=[long.pk])
    viewer = personas.client("viewer")
    first = viewer.get(page, {"profile": "chatcli", "env.CHATCLI_TOOL_RESULT_MAX_CHARS": "1111"})
    second = viewer.get(page, {"profile": "chatcli", "env.CHATCLI_TOOL_RESULT_MAX_CHARS": "2222"})
    assert first.status_code == second.status_code == 202
    old, new = BackgroundReplay.objects.order_by("pk")
    assert old.status == Status.CANCELLED and new.status == Status.QUEUED
    assert policy.pending(personas.users["viewer"]) == 1  # the dropped one counts no more
    polled = viewer.get(page, {"profile": "chatcli",
                               "env.CHATCLI_TOOL_RESULT_MAX_CHARS": "1111"})
    # Asked again, it is queued again (and supersedes the other in turn).
    assert polled.status_code == 202
    old.refresh_from_db()
    assert old.status == Status.QUEUED
    assert background.run_background_replay(long.pk, new.key) == {"status": "skipped"}
    dropped = viewer.get(page, {"profile": "chatcli",
                                "env.CHATCLI_TOOL_RESULT_MAX_CHARS": "2222"},
                         headers={"HX-Request": "true", "HX-Target": "section#replay-pending"})
    assert "you asked for newer settings" in dropped.content.decode()


def test_past_the_users_quota_a_request_is_a_429_saying_why(personas, long, settings):
    from ctxsim.generator import generate_session
    from ctxsim.transcripts.store import save_sessions

    settings.CTXSIM_PENDING_PER_USER = 2
    others = save_sessions([generate_session(12, seed=n) for n in (1, 2)], team=personas.team,
                           user=personas.users["owner"])
    viewer = personas.client("viewer")
    answers = [viewer.get(reverse("session-detail", args=[row.pk]), {"profile": "chatcli"})
               for row in (long, *others)]
    assert [a.status_code for a in answers] == [202, 202, 429]
    assert answers[2]["Retry-After"].isdigit()
    assert "at most 2 per user" in answers[2].content.decode()
    # Another user of the team is not held by the viewer's quota.
    assert personas.client("reviewer").get(reverse("session-detail", args=[others[1].pk]),
                                           {"profile": "chatcli"}).status_code == 202


def test_a_trace_the_worker_could_not_write_says_why_and_is_not_queued_again_at_once(
        personas, long, api_tokens, settings):
    path = f"/api/v1/sessions/{long.pk}/trace?profile=chatcli"
    assert Client().get(path, **bearer(api_tokens.read)).status_code == 202
    settings.CTXSIM_TRACE_MAX_BYTES = 100_000  # the worker measures it from the summary
    run_worker_tasks()
    (row,) = TraceFile.objects.all()
    assert row.status == TraceFile.Status.FAILED and "would be about" in row.message
    settings.CTXSIM_TRACE_MAX_BYTES = 10**12
    failed = Client().get(path, **bearer(api_tokens.read))
    assert failed.status_code == 422 and "would be about" in failed.json()["detail"]
    assert DBTaskResult.objects.filter(status="READY").count() == 0  # not queued again yet


def test_insights_columns_queued_for_the_worker_take_the_users_tickets(
        personas, long, settings, django_capture_on_commit_callbacks):
    settings.CTXSIM_INSIGHTS_INLINE_CALLS = 0
    settings.CTXSIM_PENDING_PER_USER = 2
    page = reverse("session-insights", args=[long.pk])
    viewer = personas.client("viewer")
    with django_capture_on_commit_callbacks(execute=True):
        two = viewer.get(page, {"profiles": ["chatcli", "none"]})
    assert two.status_code == 200 and policy.pending(personas.users["viewer"]) == 2
    assert viewer.get(page, {"profiles": ["chatcli", "none"]}).status_code == 200  # joins
    refused = viewer.get(page, {"profiles": ["aivax"]})
    assert refused.status_code == 429 and "at most 2 per user" in refused.content.decode()
