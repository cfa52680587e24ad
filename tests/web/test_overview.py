"""The team overview (SPEC §13): sessions picked like the list, one stored figure set per
(session, profile) computed by the worker, totals that are the sums of the sessions' own."""

from __future__ import annotations

import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.http import QueryDict
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from ctxsim.analysis import services as analysis
from ctxsim.analysis.choices import CacheChoice
from ctxsim.analysis.models import SessionResult
from ctxsim.generator import generate_session
from ctxsim.jobs.models import Job
from ctxsim.overview.models import ColumnTask, Status
from ctxsim.overview.tasks import compute_column_job
from ctxsim.replays.templatetags.numbers import dollars, grouped
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

URL = reverse("team-overview")
RESULTS = {"HX-Request": "true", "HX-Target": "section#overview-results"}


def corpus(personas, n=3, calls=8, user="owner"):
    sessions = [generate_session(calls + i, seed=i, oversize_every=3) for i in range(n)]
    return save_sessions(sessions, team=personas.team, user=personas.users[user])


def run_worker():
    call_command("db_worker", "--batch", "--queue-name", "*", "--no-startup-delay",
                 "--no-reload", verbosity=0)


def run_queued_figures():
    """What the worker does, in this process (for tests that keep their transaction)."""
    for pk in ColumnTask.objects.filter(status=Status.QUEUED).values_list("pk", flat=True):
        compute_column_job(pk)


def cell(html: str, profile_index: int, field: str) -> str:
    """The text of one figure's cell (markup removed)."""
    cells = re.findall(rf'data-field="{field}">(.*?)</td>', html)
    return re.sub(r"<[^>]+>", "", cells[profile_index]).strip()


def test_the_page_opens_at_once_and_queues_one_task_per_profile(personas):
    rows = corpus(personas)
    response = personas.client("viewer").get(URL + "?profiles=none&profiles=chatcli")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'data-complete="false"' in html and 'hx-trigger="every 1s"' in html
    first, second = Job.objects.filter(kind="overview").order_by("pk")  # its columns' jobs
    poll = f'{reverse("job-poll", args=[first.pk])}?also={second.pk}'
    assert f'hx-get="{poll}"' in html
    assert "<progress" in html and "0 of 6 session replays stored" in html
    tasks = DBTaskResult.objects.all()
    # One task per column (issue 28 item 1: a user's quota counts tasks), each over every
    # session; six rows, one per (session, profile), say what is pending.
    assert tasks.count() == 2 and {t.queue_name for t in tasks} == {"replays"}
    jobs = ColumnTask.objects.order_by("pk")
    assert sorted(t.args_kwargs["args"] for t in tasks) == [[job.pk] for job in jobs]
    assert [sorted(job.sessions) for job in jobs] == [sorted(r.pk for r in rows)] * 2
    assert {t.task_id for t in jobs} == {str(t.id) for t in tasks}
    # Each row is queued for its column's job, claimed by no attempt yet.
    assert SessionResult.objects.filter(figures__isnull=True, attempt__isnull=True,
                                        job__in=jobs).count() == 6
    # A second open (or a poll) finds every pair queued and queues nothing more.
    personas.client("owner").get(URL + "?profiles=none&profiles=chatcli", headers=RESULTS)
    assert DBTaskResult.objects.count() == 2


def test_figures_still_missing_once_their_job_ended_are_queued_again_and_polled(personas):
    """A row's state is its job's (issue 30): once the column's job ended without storing a
    row, the next open queues the row again and the region polls that new job, never a
    job that can no longer end it."""
    corpus(personas, n=2)
    client = personas.client("viewer")
    client.get(URL + "?profiles=none")
    ended = list(Job.objects.filter(kind="overview").values_list("pk", flat=True))
    Job.objects.filter(kind="overview").update(status="done")  # its task ended
    html = client.get(URL + "?profiles=none", headers=RESULTS).content.decode()
    pending = Job.objects.filter(kind="overview", status="queued").exclude(pk__in=ended)
    assert pending.exists() and 'data-complete="false"' in html
    assert f'hx-get="/jobs/{pending.first().pk}/' in html and "job-again" not in html
    run_queued_figures()
    html = client.get(URL + "?profiles=none", headers=RESULTS).content.decode()
    assert 'data-complete="true"' in html and "job-poll" not in html


def test_totals_equal_the_sum_of_the_sessions_own_figures(personas):
    rows = corpus(personas, n=4)
    query = "profiles=chatcli&profiles=none&model=claude-sonnet-4.5"
    personas.client("viewer").get(f"{URL}?{query}")
    run_queued_figures()
    html = personas.client("viewer").get(f"{URL}?{query}").content.decode()
    assert 'data-complete="true"' in html and "every 1s" not in html
    cache = CacheChoice(model="claude-sonnet-4.5")
    for index, ref in enumerate(("chatcli", "none")):
        own = []
        for row in rows:  # each session's own cache & information-loss page
            columns, _ = analysis.insight_columns(row, QueryDict(f"profiles={ref}"), cache.rule())
            own.append(columns[0].insights)
        sent = sum(i.input_tokens for i in own)
        assert cell(html, index, "sent_tokens") == grouped(sent)
        assert cell(html, index, "cost") == dollars(sum(i.cost for i in own))
        assert cell(html, index, "failed") == grouped(sum(len([c for c in i.calls if c.failed])
                                                      for i in own))
        cached = sum(i.cached_tokens for i in own)
        assert cell(html, index, "hit_rate") == f"{cached / sent:.3f}"
        loss = sum(len(i.loss.lost) + len(i.loss.rereads) for i in own)
        sent_calls = sum(len([c for c in i.calls if not c.failed]) for i in own)
        assert cell(html, index, "loss_per_100") == f"{loss * 100 / sent_calls:.2f} ({loss})"
        assert cell(html, index, "calls") == grouped(sum(len(i.calls) for i in own))
    # The figures are those of what was sent: without a pipeline nothing is saved.
    assert cell(html, 1, "saved_tokens") == "0 (0%)"
    assert int(cell(html, 0, "saved_tokens").split()[0].replace(",", "")) > 0
    assert "Recorded input tokens" in html and 'id="recorded-note"' in html


def test_tokens_by_tool_and_the_histogram_count_every_session(personas):
    rows = corpus(personas, n=3)
    personas.client("viewer").get(f"{URL}?profiles=none")
    run_queued_figures()
    response = personas.client("viewer").get(f"{URL}?profiles=none", headers=RESULTS)
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="overview-results"') and "<html" not in html
    overview = response.context["overview"]
    histogram = overview.histogram()
    assert sum(histogram["counts"][0]) == len(rows)
    peaks = sorted(f.figures["peak_sent"] for f in SessionResult.objects.all())
    assert histogram["edges"][-1] >= peaks[-1]
    tools = {r["tool"]: r["tokens"][0] for r in overview.tools()}
    by_tool = {}
    for f in SessionResult.objects.all():
        for tool, n in f.figures["by_tool"].items():
            by_tool[tool] = by_tool.get(tool, 0) + n
    assert sum(tools.values()) == sum(by_tool.values()) > 0
    assert 'id="overview-chart-data"' in html


def test_filters_pick_the_sessions_the_list_would(personas):
    corpus(personas, n=2, user="owner")
    corpus(personas, n=1, user="reviewer")
    response = personas.client("viewer").get(f"{URL}?profiles=none&uploader=reviewer")
    assert response.context["overview"].sessions == 1
    assert DBTaskResult.objects.count() == 1
    assert personas.client("viewer").get(f"{URL}?uploader=nobody&since=not-a-date"
                                         ).status_code == 200


def test_at_most_four_profiles_and_unknown_ones_are_reported(personas):
    corpus(personas, n=1)
    refs = "&".join(f"profiles={p}" for p in ("none", "chatcli", "aivax", "chatcli-docs",
                                              "chatcli-aivax"))
    response = personas.client("viewer").get(f"{URL}?{refs}")
    assert len(response.context["overview"].columns) == 4
    assert "at most 4 profiles" in response.content.decode()
    response = personas.client("viewer").get(f"{URL}?profiles=nope&profiles=saved:999")
    html = response.content.decode()
    assert response.status_code == 200 and "unknown profile" in html
    assert "no such saved profile" in html


def test_a_failing_session_is_counted_as_failed_not_summed(personas, monkeypatch):
    corpus(personas, n=2)
    personas.client("viewer").get(f"{URL}?profiles=none")
    first = SessionResult.objects.order_by("session_id").first()
    from ctxsim.overview import tasks

    real = tasks.session_figures

    def broken(session, settings, cache):
        if session.pk == first.session_id:
            raise RuntimeError("boom")
        return real(session, settings, cache)

    monkeypatch.setattr(tasks, "session_figures", broken)
    run_queued_figures()
    monkeypatch.undo()
    first.refresh_from_db()
    assert first.figures is None and first.message == "RuntimeError: boom"
    response = personas.client("viewer").get(f"{URL}?profiles=none")
    column = response.context["overview"].columns[0]
    assert (column.done, column.failed, column.pending) == (1, 1, 0)
    assert response.context["overview"].complete
    assert "1 failed" in response.content.decode()


def test_outsiders_see_their_own_team_only(personas):
    corpus(personas, n=2)
    response = personas.client("outsider").get(URL)
    assert response.context["overview"].sessions == 0
    assert DBTaskResult.objects.count() == 0


def cheap_sessions(team, n):
    """Rows without messages: what the overview reads of a session is its id and filters."""
    Session.objects.bulk_create([Session(team=team, title=f"s{i}", format="openai-chat")
                                 for i in range(n)], batch_size=500)


def test_a_thousand_sessions_open_at_once_are_queued_in_bulk_and_complete(personas):
    cheap_sessions(personas.team, 1000)
    client = personas.client("viewer")
    url = f"{URL}?profiles=none"
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    overview = response.context["overview"]
    assert overview.sessions == 1000 and overview.total == 1000 and overview.done == 0
    assert 'hx-trigger="every 1s"' in response.content.decode()
    # One column: its task and a copy starting half-way, so two workers share it; the quota
    # counts the column once.
    tasks = list(DBTaskResult.objects.filter(queue_name="replays"))
    assert len(tasks) == 2
    lead, copy = ColumnTask.objects.order_by("pk")
    assert sorted(lead.sessions) == sorted(Session.objects.values_list("pk", flat=True))
    assert copy.sessions == lead.sessions[500:] + lead.sessions[:500]
    assert (lead.counted, copy.counted) == (True, False)  # the quota counts the column once
    assert Job.objects.filter(kind="overview", counted=True).count() == 1
    assert SessionResult.objects.filter(figures__isnull=True, job=lead).count() == 1000
    # Bulk: a few inserts of 500 rows, not a query per session.
    assert len(queries) < 40, [q["sql"][:80] for q in queries.captured_queries]
    # Nothing was computed in the request: no figures are done, none is running.
    assert not SessionResult.objects.filter(attempt__isnull=False).exists()
    with CaptureQueriesContext(connection) as polled:
        client.get(url, headers=RESULTS)
    assert len(polled) < 25 and DBTaskResult.objects.count() == 2
    run_queued_figures()
    done = client.get(url, headers=RESULTS)
    assert done.context["overview"].complete and done.context["overview"].done == 1000
    assert "every 1s" not in done.content.decode()
    assert done.context["overview"].columns[0].totals["sessions"] == 1000


# db_worker closes its database connection after a task, which would break PostgreSQL's test
# transaction: this test commits for real.
@pytest.mark.django_db(transaction=True)
def test_the_worker_completes_the_overview(personas):
    corpus(personas, n=3)
    personas.client("viewer").get(f"{URL}?profiles=none&profiles=aivax")
    run_worker()
    response = personas.client("viewer").get(f"{URL}?profiles=none&profiles=aivax")
    assert response.context["overview"].complete
    assert SessionResult.objects.filter(figures__isnull=False).count() == 6
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").count() == 2  # one per column
    assert set(Job.objects.values_list("status", flat=True)) == {Status.DONE}


def test_deleting_a_session_deletes_its_figures(personas):
    rows = corpus(personas, n=2)
    personas.client("viewer").get(f"{URL}?profiles=none")
    run_queued_figures()
    personas.client("owner").post(reverse("session-delete", args=[rows[0].pk]))
    assert SessionResult.objects.count() == 1
    assert personas.client("viewer").get(f"{URL}?profiles=none").context["overview"].complete


def test_a_column_task_whose_worker_went_away_is_settled_and_its_live_copy_left_alone(
        personas, settings):
    """Issue 30: the job of a dead copy is settled by the lifecycle (its task row lost, queued
    again once); the other copy of the same column, still beating, is not touched."""
    from datetime import timedelta

    from django.utils import timezone

    rows = corpus(personas, n=8, calls=4)
    personas.client("viewer").get(f"{URL}?profiles=none")
    dead, live = ColumnTask.objects.order_by("pk")
    first, last = dead.sessions[0], live.sessions[0]  # where each copy starts
    long_ago = timezone.now() - timedelta(seconds=settings.CTXSIM_IMPORT_TIMEOUT_SECONDS + 5)
    for job, session, beat in ((dead, first, long_ago), (live, last, timezone.now())):
        Job.objects.filter(pk=job.pk).update(status=Status.RUNNING, started_at=beat,
                                             heartbeat_at=beat)
        SessionResult.objects.filter(session_id=session).update(job=job, attempt=0)
    DBTaskResult.objects.update(status="RUNNING")  # as their workers left them
    response = personas.client("viewer").get(f"{URL}?profiles=none", headers=RESULTS)
    dead.refresh_from_db()
    live.refresh_from_db()
    assert (dead.status, dead.attempts) == (Status.QUEUED, 1)  # queued again once
    assert (live.status, live.attempts) == (Status.RUNNING, 0)
    lost = DBTaskResult.objects.get(status="FAILED")
    assert str(lost.pk) != dead.task_id and lost.exception_class_path.endswith("WorkerLost")
    assert DBTaskResult.objects.get(pk=live.task_id).status == "RUNNING"  # left alone
    assert response.context["overview"].columns[0].pending == len(rows)
    # The dead copy's next attempt takes its own row back, and leaves the live copy's.
    compute_column_job(dead.pk)
    assert SessionResult.objects.filter(figures__isnull=True).get().session_id == last
    assert SessionResult.objects.filter(session_id=first, attempt=1).exists()
    column = personas.client("viewer").get(f"{URL}?profiles=none").context["overview"]
    assert (column.columns[0].done, column.columns[0].pending) == (len(rows) - 1, 1)


def test_a_column_lost_twice_leaves_its_rows_failed_with_why(personas, settings):
    from datetime import timedelta

    from django.utils import timezone

    corpus(personas, n=2)
    personas.client("viewer").get(f"{URL}?profiles=none")
    job = ColumnTask.objects.get()
    long_ago = timezone.now() - timedelta(seconds=settings.CTXSIM_IMPORT_TIMEOUT_SECONDS + 5)
    Job.objects.filter(pk=job.pk).update(status=Status.RUNNING, attempts=1,
                                         heartbeat_at=long_ago)
    SessionResult.objects.update(attempt=1)
    overview = personas.client("viewer").get(f"{URL}?profiles=none").context["overview"]
    job.refresh_from_db()
    assert job.status == Status.FAILED and "also after being queued again" in job.message
    assert (overview.columns[0].failed, overview.columns[0].pending) == (2, 0)
    assert overview.complete and ColumnTask.objects.count() == 1  # not queued a third time


def test_the_overview_stores_the_insights_the_session_page_then_reads(personas, monkeypatch):
    """One store (issue 30): the overview's replay of a session also stores its insights
    report, so the cache & information-loss page reads it instead of replaying, and gives
    what it would have computed itself."""
    (row,) = corpus(personas, n=1)
    cache = CacheChoice(model="gpt-5")
    fresh, _ = analysis.insight_columns(row, QueryDict("profiles=chatcli"), cache.rule())
    SessionResult.objects.all().delete()
    personas.client("viewer").get(f"{URL}?profiles=chatcli&model=gpt-5")
    run_queued_figures()
    stored = SessionResult.objects.get()
    assert stored.figures is not None and stored.data is not None

    def refused(*args, **kwargs):
        raise AssertionError("the insights page replayed a session the overview computed")

    monkeypatch.setattr("ctxsim.analysis.results.replay", refused)
    columns, _ = analysis.insight_columns(row, QueryDict("profiles=chatcli"), cache.rule())
    assert columns[0].insights == fresh[0].insights


def test_on_another_task_backend_each_pair_is_queued_through_enqueue(personas, settings):
    corpus(personas, n=2)
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend",
                                  "QUEUES": ["default", *settings.TASK_QUEUES]}}
    response = personas.client("viewer").get(f"{URL}?profiles=none")
    # The immediate backend ran each task as it was queued, inside the request.
    assert SessionResult.objects.filter(figures__isnull=False).count() == 2
    assert response.status_code == 200 and not DBTaskResult.objects.exists()


def test_settings_in_the_query_get_a_column_of_their_own(personas):
    corpus(personas, n=2)
    response = personas.client("viewer").get(
        f"{URL}?profile=aivax&toolContextCount=2&profiles=aivax")
    columns = response.context["overview"].columns
    assert [c.ref for c in columns] == ["current", "aivax"]
    assert columns[0].label == "aivax (toolContextCount=2)"
    assert columns[0].key != columns[1].key
    html = response.content.decode()
    assert '<input type="hidden" name="toolContextCount" value="2">' in html
    run_queued_figures()
    row = SessionResult.objects.filter(key=columns[0].key[0], rule=columns[0].key[1]).first()
    assert row.figures is not None and "toolContextCount=2" in row.job.columntask.query


def test_recorded_and_calibrated_figures_are_the_sums_of_each_sessions_own(personas):
    import io

    from ctxsim.replays.services import summary_for
    from ctxsim.replays.state import settings_from_query
    from ctxsim.transcripts.imports import import_transcript
    from tests.factories import claude_code_bytes

    billed = [import_transcript(io.BytesIO(claude_code_bytes(6 + n, seed=n)),
                                team=personas.team).sessions[0] for n in range(3)]
    corpus(personas, n=1)  # a session without recorded usage
    query = "profiles=none&profiles=chatcli&model=claude-sonnet-4.5"
    personas.client("viewer").get(f"{URL}?{query}")
    run_queued_figures()
    response = personas.client("viewer").get(f"{URL}?{query}")
    html = response.content.decode()
    columns = response.context["overview"].columns
    rule = CacheChoice(model="claude-sonnet-4.5").rule()
    own = []
    for row in billed:  # each session's own cache & cost page: recorded beside simulated
        cols, _ = analysis.insight_columns(row, QueryDict("profiles=none"), rule)
        own.append(analysis.recorded_view(row, cols, rule).comparison)
    for index, column in enumerate(columns):
        totals = column.totals
        assert totals["recorded_sessions"] == 3 and cell(html, index, "recorded_sessions") == "3"
        assert totals["recorded_input_tokens"] == sum(c.input_tokens for c in own) > 0
        assert cell(html, index, "recorded_cost") == dollars(sum(c.cost for c in own))
        cached = sum(c.cached for c in own)
        assert cell(html, index, "recorded_hit_rate") == (
            f"{cached / totals['recorded_input_tokens']:.3f}")
        # Calibrated sent tokens: what each session's page shows for its replay.
        settings, _ = settings_from_query({"profile": column.ref}, personas.team)
        calibrated = sum(summary_for(row, settings).totals["total_sent_calibrated"]
                         for row in billed)
        assert totals["calibrated_sessions"] == 3
        assert totals["calibrated_sent_tokens"] == calibrated
        assert cell(html, index, "calibrated_sent_tokens") == f"{grouped(calibrated)} (3 sessions)"
        assert totals["billed_saved_cost"] == pytest.approx(
            totals["billed_cost"] - totals["matched_cost"])
    # The pipeline sends less than the session did, so it saves against what was billed.
    none, chatcli = columns
    assert chatcli.totals["billed_saved_tokens"] > none.totals["billed_saved_tokens"]


def test_without_recorded_usage_the_recorded_figures_are_dashes(personas):
    corpus(personas, n=2)
    personas.client("viewer").get(f"{URL}?profiles=none")
    run_queued_figures()
    html = personas.client("viewer").get(f"{URL}?profiles=none").content.decode()
    for field in ("recorded_input_tokens", "recorded_cost", "recorded_hit_rate",
                  "calibrated_sent_tokens", "calibrated_cost", "billed_saved_cost"):
        assert cell(html, 0, field) == "—", field


def test_a_session_of_an_agent_release_is_simulated_as_that_release(personas, monkeypatch):
    """Issue 25: the overview's worker parsed its column's settings without the session, so a
    Claude Code session was simulated as the current release while its own page (and the
    corpus sweep) simulated it as the release that wrote it. Each row is now the session's
    figures under the settings its own page takes (the row stays under the column's key)."""
    from ctxsim.overview import tasks
    from ctxsim.pipeline.eras import VERSION_KEYS

    (row,) = corpus(personas, n=1, calls=40)
    Session.objects.filter(pk=row.pk).update(
        format="claude-code", meta={**(row.meta or {}), VERSION_KEYS["claude-code"]: "1.0.17"})
    row = Session.objects.get(pk=row.pk)
    used = []

    def observed(session, settings, cache):
        used.append(settings)
        return figures(session, settings, cache)

    figures = tasks.session_figures
    monkeypatch.setattr(tasks, "session_figures", observed)
    query = "profiles=claude-code"
    personas.client("viewer").get(f"{URL}?{query}")
    run_queued_figures()
    html = personas.client("viewer").get(f"{URL}?{query}").content.decode()
    (column,), _ = analysis.insight_columns(row, QueryDict(query), CacheChoice().rule())
    assert column.settings.era is not None and column.settings.era.version == "1.0.17"
    assert [s.key for s in used] == [column.settings.key]
    assert cell(html, 0, "sent_tokens") == grouped(column.insights.input_tokens)
