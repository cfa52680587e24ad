"""Issue 30's one poll of every job (`ctxsim.jobs.poll`, `GET /jobs/<pk>/`) and issue 31's
small poll: a status of a few hundred bytes while the job is pending, then where its result is
(the kind decides, never the query), and its message when it failed or was cancelled."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from ctxsim.analysis.models import InsightsJob, Sweep
from ctxsim.jobs.models import Job, Status, TraceFile
from ctxsim.replays.models import BackgroundReplay
from ctxsim.transcripts.models import ImportJob

HX = {"HX-Request": "true"}


def poll(job, *also) -> str:
    url = reverse("job-poll", args=[job.pk])
    return url + ("?" + "&".join(f"also={j.pk}" for j in also) if also else "")


def from_page(page: str) -> dict[str, str]:
    """The headers of htmx polling from `page` (htmx 4 sends the page's address)."""
    return {**HX, "HX-Current-URL": f"http://testserver{page}"}


def replay(session, **fields) -> BackgroundReplay:
    return BackgroundReplay.objects.create(session=session, key=fields.pop("key", "k1"),
                                           query="profile=chatcli", total=40, **fields)


def test_outsiders_and_unknown_ids_get_404(personas, stored):
    job = replay(stored)
    other = Job.objects.create(kind="overview", team=personas.other_team)
    assert personas.client("viewer").get(poll(job), headers=HX).status_code == 200
    assert personas.client("outsider").get(poll(job), headers=HX).status_code == 404
    assert personas.client("viewer").get(
        reverse("job-poll", args=[job.pk + other.pk + 100]), headers=HX).status_code == 404
    # One foreign job in a group, or an id that is not one, and the whole poll is refused.
    viewer = personas.client("viewer")
    assert viewer.get(poll(job, other), headers=HX).status_code == 404
    assert viewer.get(poll(job) + "?also=x1", headers=HX).status_code == 404
    assert personas.client("anonymous").get(poll(job), headers=HX).status_code in (302, 404)
    # A POST is no poll.
    assert viewer.post(poll(job), headers=HX).status_code == 405


def test_a_pending_poll_is_a_small_status_that_polls_itself(personas, stored):
    job = replay(stored, status=Status.RUNNING, done=12, started_at=timezone.now(),
                 heartbeat_at=timezone.now(), message="x" * 1900)
    response = personas.client("viewer").get(poll(job), headers=from_page("/"))
    body = response.content.decode()
    assert response.status_code == 200 and len(response.content) <= 2048, len(response.content)
    assert body.lstrip().startswith('<div class="job-poll"')
    assert f'hx-get="{poll(job)}"' in body and 'hx-trigger="every 1s"' in body
    assert 'data-job-status="running"' in body and "12 of 40 calls" in body
    assert 'value="30"' in body and "replay-progress" in body  # 12 of 40: its bar
    assert "<html" not in body and "Cache-Control" in response.headers  # never cached
    queued = replay(stored, key="k2")
    body = personas.client("viewer").get(poll(queued), headers=HX).content.decode()
    assert 'data-job-status="queued"' in body and "waiting for the worker" in body


def test_a_done_job_points_to_its_kinds_result_keeping_the_pages_own_state(personas, stored):
    job = replay(stored, status=Status.DONE, done=40)
    page = reverse("session-detail", args=[stored.pk])
    viewer = personas.client("viewer")
    # From the session page (its call and filters in the query): that page, re-encoded.
    body = viewer.get(poll(job), headers=from_page(f"{page}?profile=chatcli&call=3")).content
    assert f'hx-get="{page}?profile=chatcli&amp;call=3"'.encode() in body
    assert b'hx-trigger="load"' in body and b'hx-target="closest .job-region"' in body
    assert b"every 1s" not in body
    compare = reverse("session-compare", args=[stored.pk])
    body = viewer.get(poll(job), headers=from_page(f"{compare}?b=none")).content
    assert f'hx-get="{compare}?b=none"'.encode() in body
    # Any other address (another session, another site, no page): the kind's own URL.
    own = f'hx-get="{page}?profile=chatcli"'.encode()
    for current in (f"{reverse('session-detail', args=[stored.pk + 1])}?profile=none",
                    "https://evil.example/sessions/1/", "/no/such/page/"):
        assert own in viewer.get(poll(job), headers=from_page(current)).content
    assert own in viewer.get(poll(job), headers=HX).content
    assert b"evil" not in viewer.get(poll(job), headers={
        **HX, "HX-Current-URL": "https://evil.example/x"}).content
    # Opened without htmx: sent to the result, never to an address of the request's.
    plain = viewer.get(poll(job) + "?next=https://evil.example/")
    assert plain.status_code == 302 and plain["Location"] == f"{page}?profile=chatcli"


def test_each_kind_says_where_its_result_is(personas, stored):
    owner = personas.users["owner"]
    done = {"status": Status.DONE}
    sweep = Sweep.objects.create(session=stored, axes=[], cache={}, **done)
    imported = ImportJob.objects.create(team=personas.team, user=owner, file_name="a.jsonl",
                                        size=1, total=100, done=100, **done)
    insights = InsightsJob.objects.create(session=stored, key="k", rule="r",
                                          query="profile=none", cache={}, **done)
    overview = Job.objects.create(kind="overview", team=personas.team, **done)
    viewer = personas.client("viewer")
    for job, url in ((sweep, reverse("sweep-detail", args=[stored.pk, sweep.pk])),
                     (imported, reverse("import-job", args=[imported.pk])),
                     (insights, reverse("session-insights", args=[stored.pk])
                      + "?profile=none"),
                     (overview, reverse("team-overview"))):
        body = viewer.get(poll(job), headers=HX).content.decode()
        assert f'hx-get="{url}"' in body and 'hx-trigger="load"' in body, job.kind
    # A trace file's page is its result: done, the page reloads (and downloads it).
    trace = TraceFile.objects.create(session=stored, key="k", summary=False,
                                     query="profile=none", **done)
    response = viewer.get(poll(trace), headers=HX)
    assert response["HX-Refresh"] == "true"
    assert viewer.get(poll(trace))["Location"] == (
        reverse("session-trace", args=[stored.pk]) + "?profile=none&summary=0")


def test_failed_and_cancelled_jobs_show_their_message(personas, stored):
    viewer = personas.client("viewer")
    failed = replay(stored, status=Status.FAILED, message="the disk is full")
    body = viewer.get(poll(failed), headers=HX).content.decode()
    # A failed replay is queued again when its page opens: the poll never opens it itself.
    assert "Failed:" in body and "the disk is full" in body
    assert 'hx-trigger' not in body and "Open the page again" in body
    dropped = replay(stored, key="k2", status=Status.CANCELLED,
                     message="superseded by newer settings")
    body = viewer.get(poll(dropped), headers=HX).content.decode()
    assert "Cancelled" in body and "superseded by newer settings" in body
    # An import's region shows its failure itself (and its Re-queue button): it is loaded.
    imported = ImportJob.objects.create(team=personas.team, file_name="a.jsonl", size=1,
                                        status=Status.FAILED, message="not a transcript")
    body = viewer.get(poll(imported), headers=HX).content.decode()
    assert "not a transcript" in body and 'hx-trigger="load"' in body
    region = viewer.get(reverse("import-job", args=[imported.pk]), headers={
        **HX, "HX-Target": f"div#import-job-{imported.pk}"}).content.decode()
    assert "not a transcript" in region and "job-poll" not in region


def test_a_group_is_polled_as_one_and_ends_once_every_job_has(personas, stored):
    first = InsightsJob.objects.create(session=stored, key="a", rule="r", query="profile=none",
                                       cache={}, status=Status.DONE)
    second = InsightsJob.objects.create(session=stored, key="b", rule="r",
                                        query="profile=chatcli", cache={})
    viewer = personas.client("viewer")
    body = viewer.get(poll(first, second), headers=HX).content.decode()
    assert 'data-job-status="queued"' in body and "1 of 2 done" in body
    assert f'hx-get="{poll(first, second)}"' in body and 'hx-trigger="every 2s"' in body
    assert len(body) < 2048
    InsightsJob.objects.filter(pk=second.pk).update(status=Status.FAILED, message="no memory")
    body = viewer.get(poll(first, second), headers=HX).content.decode()
    assert "no memory" in body and 'hx-trigger="load"' in body  # the section shows the rest


def test_a_poll_settles_a_job_whose_worker_went_away(personas, stored, settings):
    long_ago = timezone.now() - timedelta(hours=3)
    job = replay(stored, status=Status.RUNNING, started_at=long_ago, heartbeat_at=long_ago,
                 task_id="gone")
    body = personas.client("viewer").get(poll(job), headers=HX).content.decode()
    job.refresh_from_db()
    assert job.status == Status.QUEUED and job.attempts == 1  # queued again, once
    assert 'data-job-status="queued"' in body and "the worker stopped" in body
