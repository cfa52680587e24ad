"""Issue 20 item 1 and acceptance 3: what one settings key may store and keep in memory.

A viewer's new thresholds each stored a replay summary plus a row per spill per call, and each
web process kept every replay in maps bounded by count. Now spills are one packed record per
run, a session keeps at most CTXSIM_RUNS_PER_SESSION runs besides its pinned ones, and one byte
budget (CTXSIM_SESSION_CACHE_MB) bounds what a process keeps.
"""

from __future__ import annotations

import gc

import pytest
from django.db import connection
from django.http import Http404
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.replays.cache import LRU, REPLAYS, Pool
from ctxsim.replays.models import ReplayRun, SpillContent
from ctxsim.replays.spills import spill_at, spills_in_call, spills_of
from ctxsim.transcripts.store import save_sessions
from tests.factories import SPILLED, first_spill, spill_args

pytestmark = pytest.mark.django_db


# --- (a) the in-process maps evict by bytes, over one shared budget --------------------------

def test_maps_sharing_a_pool_evict_the_least_recently_used_entry_of_any_of_them() -> None:
    pool = Pool(100)
    small: LRU[bytes] = LRU(size=len, pool=pool)
    other: LRU[bytes] = LRU(size=len, pool=pool)
    small.put("a", b"x" * 40)
    other.put("b", b"y" * 40)
    assert small.get("a") is not None  # now the most recently used: "b" goes first
    other.put("c", b"z" * 30)
    assert other.get("b") is None and small.get("a") is not None and other.get("c") is not None
    assert pool.total == 70 and small.total == 40 and other.total == 30
    other.put("big", b"w" * 500)  # over the budget alone: the newest entry always stays
    assert small.items() == [] and [k for k, _ in other.items()] == ["big"]
    assert pool.total == 500
    assert other.pop("big") is not None and pool.total == 0


def test_clearing_one_map_of_a_pool_keeps_the_others_and_their_accounting() -> None:
    pool = Pool(1000)
    one: LRU[bytes] = LRU(size=len, pool=pool)
    two: LRU[bytes] = LRU(size=len, pool=pool)
    one.put(1, b"a" * 10)
    two.put(1, b"b" * 20)  # the same key in two maps: two entries
    one.clear()
    assert one.get(1) is None and two.get(1) == b"b" * 20
    assert pool.total == 20
    two.put(1, b"c" * 5)  # replacing an entry replaces its size
    assert pool.total == 5


def test_the_replay_cache_keeps_replays_within_its_byte_budget(personas) -> None:
    """The paused and kept replays count by their estimated bytes: with a budget of a few of
    them, a viewer's new thresholds push out the oldest instead of piling up."""
    from ctxsim.generator import generate_session
    from ctxsim.replays import sizes

    row = save_sessions([generate_session(60, seed=4, oversize_every=6)], team=personas.team)[0]
    client = personas.client("viewer")
    with REPLAYS.resized(6 * 1024 * 1024):
        for i in range(8):
            query = f"?env.CHATCLI_TOOL_RESULT_MAX_CHARS={3000 + 500 * i}&call={10 + i}"
            response = client.get(reverse("session-detail", args=[row.pk]) + query, follow=True)
            assert response.status_code == 200
            assert REPLAYS.pool.total <= REPLAYS.pool.limit
        kept = REPLAYS.kept.items()
        assert 0 < len(kept) < 8
        # Each kept replay is estimated from what it made, not counted as one.
        estimates = [sizes.replay_bytes(rep, *calls.values()) for _, (calls, rep) in kept]
        assert min(estimates) > sizes.REPLAY_BASE
        # Their spilled bytes are in storage: the replays keep the spills' names only.
        records = [r for _, (_, rep) in kept for r in rep.spills.records]
        assert records and all(r.content == b"" for r in records)


@pytest.mark.parametrize("profile", ["chatcli", "codex", "openhands"])
def test_a_paused_replays_estimate_is_not_below_what_it_holds(personas, profile) -> None:
    """`replay_bytes` is checked against tracemalloc: what dropping a paused replay frees is
    at most a quarter more than its estimate (stages' memos, cost cache and made messages are
    all counted; contents shared with the token cache make it an over-estimate at times)."""
    import tracemalloc

    from ctxsim.generator import generate_session

    row = save_sessions([generate_session(120, seed=2, oversize_every=5)], team=personas.team)[0]
    client = personas.client("viewer")
    with REPLAYS.resized(1024 * 1024 * 1024):
        assert client.get(page(row, f"profile={profile}&call=3"), follow=True).status_code == 200
        tracemalloc.start()
        try:
            REPLAYS.kept.clear()
            assert client.get(page(row, f"profile={profile}&call=110"),
                              follow=True).status_code == 200
            gc.collect()
            estimate = REPLAYS.live.total
            before = tracemalloc.get_traced_memory()[0]
            REPLAYS.live.clear()
            gc.collect()
            freed = before - tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
    assert freed > 256 * 1024
    assert estimate >= 0.8 * freed, (estimate, freed)
    assert estimate <= 4 * freed, (estimate, freed)


# --- spills: one packed record per run, links that survive eviction -------------------------

OTHER = "\n".join(f"row {n:05d} of a second, smaller result " + "y" * 30 for n in range(180))


def two_result_session() -> Session:
    """A 25 KB result every ChatCLI threshold spills, and a 12 KB one only low ones spill."""
    return Session(format="openai-chat", title="Two results", messages=(
        Message.of("system", "You are a build agent."),
        Message.of("user", "Why does the build fail?"),
        Message.of("assistant", "", tool_calls=[ToolCall("call_1", "run_build", "{}")]),
        Message.of("tool", SPILLED, tool_call_id="call_1", is_error=True),
        Message.of("assistant", "", tool_calls=[ToolCall("call_2", "read_log", "{}")]),
        Message.of("tool", OTHER, tool_call_id="call_2"),
        Message.of("assistant", "The linker fails on line 17."),
    ))


def page(row, query: str = "") -> str:
    return reverse("session-detail", args=[row.pk]) + (f"?{query}" if query else "")


def low_cap_run(personas):
    """The two-result session stored, a viewer's client, and the run of a 10,000-byte cap
    (ChatCLI spills both results, and re-spills them at later calls), replayed by a page."""
    row = save_sessions([two_result_session()], team=personas.team)[0]
    client = personas.client("viewer")
    assert client.get(page(row, "env.CHATCLI_TOOL_RESULT_MAX_CHARS=10000&call=2"),
                      follow=True).status_code == 200
    return row, client, ReplayRun.objects.get(session=row, pinned=False)


def test_a_replays_spills_are_one_record_and_one_row_per_distinct_content(personas):
    """ChatCLI re-spills a result at every later call: three spills of two contents are one
    packed field on the run and two content rows, not three rows."""
    row, client, run = low_cap_run(personas)
    refs = spills_of(run)
    assert len(refs) > len({s.sha256 for s in refs}) == 2
    assert {s.size for s in refs} == {len(SPILLED), len(OTHER)}
    assert set(SpillContent.objects.filter(session=row).values_list("sha256", flat=True)) == {
        s.sha256 for s in refs}
    # Every spill of that run opens in the viewer (with its own name and call).
    for spill in refs:
        body = client.get(reverse("spill-view", args=spill_args(row, spill))).content.decode()
        assert spill.path in body and f"call {spill.created_in_call}" in body


def test_a_calls_spills_and_a_spill_by_position_are_read_from_the_packed_record(personas):
    """A call view asks for its own call's spills and the viewer for one spill by position:
    each is made from the packed record when asked for (not every ref of the run), and equals
    what the whole list says."""
    _, _, run = low_cap_run(personas)
    every = spills_of(run)
    assert len(every) >= 3 and len({s.created_in_call for s in every}) >= 2
    fresh = ReplayRun.objects.get(pk=run.pk)  # decoded again, by call first
    for index in range(len(run.calls)):
        assert spills_in_call(fresh, index) == {
            s.name: s for s in every if s.created_in_call == index}
    assert [spill_at(fresh, seq) for seq in range(len(every))] == every
    for seq in (-1, len(every)):
        with pytest.raises(Http404):
            spill_at(fresh, seq)


def test_a_session_keeps_its_runs_per_session_and_evicted_spill_files_go(
    personas, settings, django_capture_on_commit_callbacks
):
    from django.core.files.storage import default_storage

    settings.CTXSIM_RUNS_PER_SESSION = 1
    row = save_sessions([two_result_session()], team=personas.team)[0]
    client = personas.client("viewer")
    assert client.get(page(row), follow=True).status_code == 200  # the default: pinned
    low = "env.CHATCLI_TOOL_RESULT_MAX_CHARS=10000&call=2"
    assert client.get(page(row, low), follow=True).status_code == 200
    other = next(s for s in spills_of(ReplayRun.objects.get(session=row, pinned=False))
                 if s.size == len(OTHER))
    url = reverse("spill-view", args=spill_args(row, other))
    assert client.get(url).status_code == 200 and default_storage.exists(other.storage_name)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.get(page(row, "env.CHATCLI_TOOL_RESULT_MAX_CHARS=30000&call=2"),
                          follow=True).status_code == 200
    assert ReplayRun.objects.filter(session=row).count() == 2  # the pinned one and the newest
    assert ReplayRun.objects.filter(session=row, pinned=True).count() == 1
    assert not default_storage.exists(other.storage_name)  # only the evicted run had it
    assert default_storage.exists(first_spill(row).storage_name)  # the pinned one's stays
    assert not SpillContent.objects.filter(session=row, sha256=other.sha256).exists()
    assert client.get(url).status_code == 404
    # Asked again, the replay comes back and so does the same link.
    REPLAYS.forget_replays()
    assert client.get(page(row, low), follow=True).status_code == 200
    assert client.get(url).status_code == 200


def test_a_run_over_its_byte_bound_keeps_counts_instead_of_long_report_lists() -> None:
    from ctxsim.replays.run_bounds import fit_stored, run_byte_bound, stored_bytes

    calls = [{"i": n, "reports": {"budget": {"spilled": ["x" * 300] * 20, "note": "n" * 5000}}}
             for n in range(10)]
    totals: dict = {}
    assert stored_bytes(calls, totals, b"") > run_byte_bound(10)
    fit_stored(calls, totals, b"")
    assert stored_bytes(calls, totals, b"") <= run_byte_bound(10)
    report = calls[0]["reports"]["budget"]
    assert report["spilled"] == [] and report["spilled_count"] == 20
    untouched = [{"i": 0, "reports": {"budget": {"spilled": ["a"]}}}]
    fit_stored(untouched, totals, b"")
    assert untouched[0]["reports"]["budget"] == {"spilled": ["a"]}


# --- (b) acceptance 3: a viewer's 50 new thresholds on a 300-call session -------------------

def database_bytes() -> int:
    """Bytes the database's tables and indexes take (SQLite: pages in use; PostgreSQL:
    pg_total_relation_size of every table, with its indexes and TOAST)."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA freelist_count")
            free = cursor.fetchone()[0]
            cursor.execute("PRAGMA page_size")
            return (pages - free) * cursor.fetchone()[0]
        cursor.execute("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                       "JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE n.nspname = current_schema() AND c.relkind = 'r'")
        return int(cursor.fetchone()[0])


def rss_bytes(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


# What the process may hold past CTXSIM_SESSION_CACHE_MB (README, "Limits"): the token
# counter's own cache, bounded apart by TiktokenCounter.MAX_CACHED_BYTES (96 MB here, which
# these GETs do not reach: past it the cache starts over and every count is redone), plus one
# request's transient work (the replay being built, the page) and the allocator's slack.
TOKEN_CACHE = 96 * 1024 * 1024
TRANSIENT = 64 * 1024 * 1024


def test_a_viewers_50_new_thresholds_stay_within_the_database_and_memory_bounds(
    personas, settings, monkeypatch
):
    from ctxsim.generator import generate_session
    from ctxsim.pipeline.tokens import TiktokenCounter
    from ctxsim.replays.run_bounds import run_byte_bound

    budget = 48 * 1024 * 1024
    monkeypatch.setattr(TiktokenCounter, "MAX_CACHED_BYTES", TOKEN_CACHE)
    row = save_sessions([generate_session(300, seed=1, oversize_every=6)], team=personas.team)[0]
    client = personas.client("viewer")
    with REPLAYS.resized(budget):
        assert client.get(page(row), follow=True).status_code == 200  # loads the session
        gc.collect()
        database, memory = database_bytes(), rss_bytes()
        peak = memory
        for i in range(50):
            # 4,000 to 18,700 characters: each changes what spills, so each is a new replay.
            query = f"env.CHATCLI_TOOL_RESULT_MAX_CHARS={4000 + 300 * i}&call={100 + 4 * i}"
            assert client.get(page(row, query), follow=True).status_code == 200
            assert REPLAYS.pool.total <= budget
            peak = max(peak, rss_bytes())
        grown = database_bytes() - database
        calls = row.model_call_count
        assert ReplayRun.objects.filter(session=row).count() <= (
            settings.CTXSIM_RUNS_PER_SESSION + 1)
    assert calls == 300
    assert run_byte_bound(calls) <= 1024 * 1024
    assert grown / 50 <= run_byte_bound(calls), grown / 50
    print(f"database +{grown / 50 / 1024:.0f} KB per GET, RSS +{(peak - memory) >> 20} MB")
    assert peak - memory <= budget + TOKEN_CACHE + TRANSIENT, (peak - memory) >> 20


def test_a_step_reads_its_summary_from_memory_when_the_session_and_replay_fill_the_budget(
        personas) -> None:
    """Issue 31: at 16,000 calls the loaded session and the paused replay fill the default
    budget; the summary, read first by every request, went first, and each step read it from
    the database again. A call view puts it back after the replay: the session goes."""
    from django.core.cache import cache
    from django.test.utils import CaptureQueriesContext

    from ctxsim.generator import generate_session
    from ctxsim.replays.services import compute_default_stats

    row = save_sessions([generate_session(60, seed=4)], team=personas.team)[0]
    compute_default_stats(row)  # the stored summary a visit finds
    client = personas.client("viewer")
    step = {"HX-Request": "true", "HX-Target": "div#call-view"}
    with REPLAYS.resized(1024 * 1024 * 1024):
        assert client.get(page(row, "call=30"), follow=True).status_code == 200
        sizes = REPLAYS.sessions.total, REPLAYS.live.total, REPLAYS.runs.total
    assert all(sizes)
    # Room for the session and the replay, not for the summary beside them.
    cache.clear()  # the call views every process shares: this one replays to the call
    with REPLAYS.resized(sizes[0] + sizes[1] + sizes[2] // 2):
        assert client.get(page(row, "call=30"), follow=True).status_code == 200
        assert REPLAYS.runs.total == sizes[2] and REPLAYS.live.total
        with CaptureQueriesContext(connection) as queries:
            response = client.get(page(row, "call=31"), headers=step)
        assert response.status_code == 200 and b'id="msg-31-' in response.content
    table = ReplayRun._meta.db_table
    assert not [q for q in queries.captured_queries
                if f'FROM "{table}"' in q["sql"] and "SELECT" in q["sql"]]


def test_only_short_sessions_keep_every_call_whatever_the_inline_bound(settings) -> None:
    """What the kept calls hold grows with the square of the session: raising the inline
    bound (the bench replays 16,000 calls inline) must not keep every call of a long one."""
    from types import SimpleNamespace

    from ctxsim.replays.services import KEEP_EVERY_CALL_UP_TO, keeps_every_call

    settings.CTXSIM_INLINE_REPLAY_CALLS = 16_000
    assert keeps_every_call(SimpleNamespace(model_call_count=KEEP_EVERY_CALL_UP_TO))
    assert not keeps_every_call(SimpleNamespace(model_call_count=KEEP_EVERY_CALL_UP_TO + 1))
    settings.CTXSIM_INLINE_REPLAY_CALLS = 100
    assert not keeps_every_call(SimpleNamespace(model_call_count=200))
