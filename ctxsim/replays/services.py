"""Replays of stored sessions: what other apps and the views call.

`summary_for` returns the stored per-call summary of a replay, replaying on a miss;
`call_detail` replays up to one call and returns everything the call view shows; `trace_json`
is the SPEC §6 trace (a comparison's two replays: `ctxsim.replays.comparison`). Settings come
from `ctxsim.replays.state`, what a process keeps from `ctxsim.replays.cache`, profiles from
`ctxsim.replays.profiles` and spilled files from `ctxsim.replays.spills`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.messages import Session as CanonicalSession
from ctxsim.pipeline.profiles import PROFILES, default_profile_for
from ctxsim.pipeline.replay import CallResult, Replay, replay
from ctxsim.pipeline.spill import MemorySpillSink, NullSpillSink
from ctxsim.pipeline.tokens import get_counter
from ctxsim.pipeline.trace import replay_calibration
from ctxsim.pipeline.usage import call_recorded, session_totals
from ctxsim.replays import analysis, flight, rendering, spills
from ctxsim.replays.cache import REPLAYS, LiveReplay, LoadedSession, ReplayKey
from ctxsim.replays.limits import replay_slot
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.run_bounds import fit_stored
from ctxsim.replays.spills import StorageSpillSink
from ctxsim.replays.state import ReplaySettings, era_of
from ctxsim.replays.token_counts import load_counts, save_counts
from ctxsim.replays.view_memo import ViewMemo
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.store import load_session
from ctxsim.warm import warm_pages

logger = logging.getLogger(__name__)


def canonical_session(session: Session, counter_name: str | None = None, *,
                      other_counts: bool = False) -> CanonicalSession:
    """The session's canonical messages (kept per process); with `counter_name`, that counter
    is primed with the token counts stored for them, and with `other_counts` also with the
    derived counts other processes stored since this one last looked (a replay about to run
    takes them instead of tokenizing the same previews again)."""
    key = ReplayKey.of(session)
    entry = REPLAYS.sessions.get(key)
    if entry is None:
        entry = LoadedSession(load_session(session), session.total_bytes)
        REPLAYS.sessions.put(key, entry)
    seen = entry.seen  # counter name -> the last derived count id taken
    if counter_name is not None and (counter_name not in seen or other_counts):
        seen[counter_name] = load_counts(
            session, entry.canonical, get_counter(counter_name),
            contents=counter_name not in seen, derived_after=seen.get(counter_name, 0),
        )
    return entry.canonical


def warm_encoding() -> str:
    """Load the default counter's BPE table (what every replay needs first; ~0.2 s and 40 MB
    for cl100k_base) and return the counter's name."""
    counter = ReplaySettings().counter
    get_counter(counter).count(b"warm")
    return counter


def warm_up(sessions: int | None = None) -> int:
    """Load what every request needs before serving any: the default counter's encoding,
    the stored default replay summary of each of the newest `sessions` sessions
    (CTXSIM_WARM_SESSIONS by default), and those sessions with their token counts within half
    the session cache (a longer one is left to its first request; its summary is not: the
    first step a worker served of a 16,000-call session read it, 0.3 s). A loaded session
    that replays inline is also replayed with its default settings, every call kept, while
    the cache stays within three quarters of its budget: each worker process otherwise
    replayed it again under the first request for one of its calls.

    gunicorn runs this once in its master (`deploy/gunicorn.conf.py`, with the app preloaded),
    so every worker starts with it instead of all of them paying for it under the first
    requests. Returns how many sessions it loaded; closes its database connections, which
    must not be shared with the forked workers."""
    from django.db import connections

    if sessions is None:
        sessions = django_settings.CTXSIM_WARM_SESSIONS
    counter = warm_encoding()
    rendering.warm_lexers()  # what the first call view showing a file's content paid
    warm_pages()  # the URLconf and the templates: what each worker's first requests paid
    loaded, budget = 0, REPLAYS.session_bytes // 2
    try:
        for row in Session.objects.filter(parent__isnull=True).order_by("-created_at")[:sessions]:
            settings = default_settings(row)
            run = stored_summary(row, settings)
            if row.total_bytes > budget:
                continue
            budget -= row.total_bytes
            canonical_session(row, counter)
            loaded += 1
            if (run is not None and run.calls and keeps_every_call(row)
                    and REPLAYS.pool.total < REPLAYS.session_bytes * 3 // 4):
                _replay_to(row, settings, len(run.calls) - 1)
    finally:
        connections.close_all()
    return loaded


def summary_for(session: Session, settings: ReplaySettings, keep: int | None = None, *,
                user: Any = None, progress: Callable[[int], None] | None = None) -> ReplayRun:
    """The stored replay summary for these settings; replays and stores it on a miss.

    On a miss the replay passes every call anyway, so it keeps the call a page is about to
    show (`keep`, or the one that sent the most, the page's default) for `call_detail`. With
    `user`, a miss takes one of their replay slots (`limits.replay_slot`: ReplayBusy when
    they already replay as much as they may). `progress(calls replayed)` is called after each
    call of a new replay (the worker reports it, `ctxsim.replays.background`).
    """
    key = ReplayKey.of(session, settings.key)
    cached = _stored_run(session, key)
    if cached is not None:
        return cached
    # One replay of these settings at a time: among this process's threads, then among the
    # machine's processes (`flight`); a waiter reads the run the first one stored.
    with REPLAYS.replaying(key), flight.one_at_a_time(session.pk, key.run):
        cached = _stored_run(session, key)
        if cached is not None:
            return cached
        # The slot only around the work: a second request for the same settings waits above
        # for the first one's result instead of being refused.
        with replay_slot(user):
            run = _replay_and_store(session, settings, key, keep, progress)
        REPLAYS.runs.put(key, run)
        return run


# The calls kept around a call a page shows (the summary replay's around the one the page
# opens on, a worker's call job's around its call): where `k` and `j` go next. As many before
# as after: the page opens on the call that sent the most, often the last, so `k` is where a
# reader goes first (with four before, the fifth `k` waited 4 s for the worker at 16,000 calls).
KEPT_BEFORE, KEPT_AFTER = 8, 8

# A served run's `used_at` is written again at most this often (eviction is by it, roughly).
TOUCH_SECONDS = 300


def stored_summary(session: Session, settings: ReplaySettings) -> ReplayRun | None:
    """The replay summary for these settings when this process or the database has it; never
    replays."""
    return _stored_run(session, ReplayKey.of(session, settings.key))


def _stored_run(session: Session, key: ReplayKey) -> ReplayRun | None:
    run = REPLAYS.runs.get(key)
    if run is None:
        run = ReplayRun.objects.filter(session=session, key=key.run).first()
        if run is not None:
            REPLAYS.runs.put(key, run)
    if run is not None and run.used_at < timezone.now() - timedelta(seconds=TOUCH_SECONDS):
        run.used_at = timezone.now()
        ReplayRun.objects.filter(pk=run.pk).update(used_at=run.used_at)
    return run


def _pinned(session: Session, settings: ReplaySettings) -> bool:
    """A replay never evicted: the session's default one, or a saved profile's as saved."""
    if settings.saved is not None and not settings.config and settings.stages is None:
        return True
    return settings.key == default_settings(session).key


def _evict_runs(session: Session, keep: ReplayRun) -> None:
    """Keep at most CTXSIM_RUNS_PER_SESSION unpinned runs of the session, dropping the least
    recently used ones and the spill files nothing points to any more."""
    limit = django_settings.CTXSIM_RUNS_PER_SESSION
    unpinned = ReplayRun.objects.filter(session=session, pinned=False).exclude(pk=keep.pk)
    doomed = list(unpinned.order_by("-used_at", "-pk").values_list("pk", "key")[limit - 1:])
    if not doomed:
        return
    with transaction.atomic():
        ReplayRun.objects.filter(pk__in=[pk for pk, _ in doomed]).delete()
        spills.forget_unreferenced(session)
    for _, key in doomed:
        REPLAYS.runs.pop(ReplayKey.of(session, key))


def _replay_and_store(session: Session, settings: ReplaySettings, key: ReplayKey,
                      keep: int | None,
                      progress: Callable[[int], None] | None = None) -> ReplayRun:
    rc = settings.run_config()
    canonical = canonical_session(session, settings.counter, other_counts=True)
    counter = get_counter(settings.counter)
    sink = StorageSpillSink()
    rep = replay(canonical, rc, sink=sink)
    calls, kept = [], None
    # The call that sent the most (where the page opens, `page.selected_call`) and the calls
    # around it, where `j` and `k` go from there: KEPT_BEFORE before it, KEPT_AFTER after.
    peak, before_peak, after_peak = None, [], []
    recent: deque[CallResult] = deque(maxlen=KEPT_BEFORE)
    every: list[CallResult] | None = [] if keeps_every_call(session) else None  # `_replay_to`
    # Only what this replay tokenized is filed under this session (the counter is shared with
    # the replays of other sessions, in this thread and others). With the head and tail pieces
    # of its long contents when web processes replay it (`pieces_shared`).
    with counter.recording(pieces=pieces_shared(session)) as fresh:
        # SPEC §11: once per summary, a pass over the raw history (no replay).
        calibration = replay_calibration(rep)
        for call in rep.calls():
            recorded = call_recorded(rep.messages, call.response_input_index)
            calls.append(analysis.call_summary(call, recorded, calibration, rep.token_model))
            if call.call_index == keep:
                kept = call
            if peak is None or call.sent_tokens >= peak.sent_tokens:
                peak, before_peak, after_peak = call, list(recent), []
            elif len(after_peak) < KEPT_AFTER:
                after_peak.append(call)
            recent.append(call)
            if every is not None:
                every.append(call)
            if progress is not None:
                progress(len(calls))
    held = every or [c for c in (kept, *before_peak, peak, *after_peak) if c is not None]
    packed, contents = spills.pack_spills(rep.spilled_files, sink.sha256)
    # The bytes are in storage now: the kept replay needs the spills' names only.
    spills.drop_contents(rep, held, sink)
    REPLAYS.kept.put(key, ({c.call_index: c for c in held}, rep))
    loaded = REPLAYS.sessions.get(ReplayKey.of(session))
    save_counts(session, canonical, counter, fresh,
                contents=loaded is None or counter.name not in loaded.stored)
    if loaded is not None:
        loaded.stored.add(counter.name)
    totals = analysis.totals(calls)
    totals["notes"] = analysis.notes(calls, rc.values, rc.stages, canonical.messages)
    totals["warnings"] = list(rc.warnings)
    totals["calibration"] = calibration.as_json() if calibration else None
    totals["token_model"] = rep.token_model.as_json() if rep.token_model else None
    # Per-call sums, else what the file records for the whole session (SWE-agent).
    totals["recorded"] = (session_totals([c["rec"] for c in calls])
                          or canonical.meta.get("recorded_totals"))
    totals["model"] = canonical.meta.get("model")
    fit_stored(calls, totals, packed)
    pinned = _pinned(session, settings)
    try:
        with transaction.atomic():
            run = ReplayRun.objects.create(
                session=session, key=key.run, profile=settings.profile.name,
                stages=[list(e) for e in rc.stages], config=rc.effective_config(),
                counter=settings.counter, calls=calls, totals=totals, spill_files=packed,
                pinned=pinned,
            )
            spills.record_contents(session, contents)
    except IntegrityError:  # the same replay was stored concurrently
        return ReplayRun.objects.get(session=session, key=key.run)
    if not pinned:
        _evict_runs(session, run)
    return run


@dataclass
class CallDetail:
    call: CallResult
    view: analysis.CallView
    # What the view remembers (its replay's, which the view holds weakly): held as long as
    # the detail is read, even if the replay is dropped from this process's cache meanwhile.
    memo: ViewMemo


def _replay_to(session: Session, settings: ReplaySettings, index: int,
               user: Any = None) -> tuple[CallResult, Replay]:
    """Call `index` of the replay: kept by the summary replay, or passed or reached by stepping
    the replay this process left paused (one step for the next call), or by a new replay. More
    than the next call's step is a replay's work: it takes one of `user`'s replay slots. A
    short session's replays keep every call they pass (`keeps_every_call`): its reviewers step
    at different calls, and each one behind the paused replay replayed from the start."""
    key = ReplayKey.of(session, settings.key)
    kept = REPLAYS.kept.get(key)
    if kept is not None and index in kept[0]:
        return kept[0][index], kept[1]
    live = REPLAYS.live.get(key)
    if live is not None and live.passed and index in live.passed:
        return live.passed[index], live.replay
    live = REPLAYS.live.pop(key)
    next_step = live is not None and live.last.call_index in (index, index - 1)
    passed = []
    with contextlib.nullcontext() if next_step else replay_slot(user):
        if live is None or live.last.call_index > index:
            canonical = canonical_session(session, settings.counter, other_counts=True)
            rep = replay(canonical, settings.run_config(), sink=NullSpillSink())
            live = LiveReplay(rep, rep.calls(), passed={} if keeps_every_call(session) else None)
        while live.last is None or live.last.call_index < index:
            nxt = next(live.calls, None)
            if nxt is None:
                raise IndexError(index)
            live.last = nxt
            if live.passed is not None:
                live.passed[nxt.call_index] = nxt
                passed.append(nxt)
    # The call view shows names, not bytes.
    spills.drop_contents(live.replay, passed or [live.last])
    REPLAYS.live.put(key, live)
    return live.last, live.replay


# Past this many calls a replay never keeps every call, whatever the inline bound: what the
# kept calls hold grows with the square of the session (a stage that returns a tuple holds a
# whole history per call: 463 M references for 16,000 calls, and measuring them took 2 s of a
# background replay run with the bound raised to 16,000).
KEEP_EVERY_CALL_UP_TO = 1000


def pieces_shared(session: Session) -> bool:
    """Whether a replay of `session` stores the pieces of the contents it counts
    (`TiktokenCounter.recording`) with the counts it stores: when web processes replay the
    session (CTXSIM_INLINE_REPLAY_CALLS). A web process that loaded the session's counts then
    counts a new threshold's previews of its long results without tokenizing their heads and
    tails again: a 200-call session's first lower cap cost 238 ms of CPU in a web process, 157
    ms with the pieces known (issue 31). A longer session replays on the worker, which keeps
    its own pieces (184,000 rows for 16,000 calls would be loaded for nothing)."""
    return session.model_call_count <= django_settings.CTXSIM_INLINE_REPLAY_CALLS


def keeps_every_call(session: Session) -> bool:
    """Whether a replay of `session` keeps every call it passes: one that replays inline
    (CTXSIM_INLINE_REPLAY_CALLS) and is short (`KEEP_EVERY_CALL_UP_TO`); its calls' histories
    share most of their storage."""
    return session.model_call_count <= min(django_settings.CTXSIM_INLINE_REPLAY_CALLS,
                                           KEEP_EVERY_CALL_UP_TO)


def call_detail(
    session: Session, settings: ReplaySettings, run: ReplayRun, index: int, user: Any = None
) -> CallDetail:
    """Replay up to call `index` and align what was sent with the raw history."""
    chosen, rep = _replay_to(session, settings, index, user)
    # The summary every step reads outlives the loaded session, whose messages the paused
    # replay holds anyway: put back after the replay, it is not what the budget lets go
    # first (at 16,000 calls the session and the replay fill the default budget, and each
    # step read the summary from the database again: 0.4 s of 0.6, issue 31).
    key = ReplayKey.of(session, settings.key)
    if REPLAYS.runs.get(key) is None:
        REPLAYS.runs.put(key, run)
    memo = _view_memo(rep)
    with memo.lock:  # the memo is brought up to this call: one request at a time
        if memo.last is not None and memo.last[0] is chosen:
            return CallDetail(chosen, memo.last[1], memo)
        view = analysis.call_view(chosen, rep.cost, memo.capped_of(rep.dispatch), rep.costs,
                                  memo)
        view.spill_records = spills.spills_in_call(run, index)  # what a spilled row links to
        memo.last = (chosen, view)
    for kept in (REPLAYS.live, REPLAYS.kept):  # its size now counts what the view remembers
        kept.remeasure(key)
    return CallDetail(chosen, view, memo)


def _view_memo(rep: Replay) -> ViewMemo:
    """What the call views of a replay this process keeps (paused or kept) remember: each
    message's tools, and the last view (a page reads the rows of its call more than once).
    Kept on the replay, so it goes with it."""
    return vars(rep).setdefault("_call_views", ViewMemo())


def default_settings(session: Session) -> ReplaySettings:
    """What a session opens with when nothing is chosen: its own agent's profile
    (`claude-code`, `codex`, `openhands`; SPEC-agents §2.5.9), else ChatCLI's."""
    ref = default_profile_for(session.format)
    return ReplaySettings(profile_ref=ref, profile=PROFILES[ref],
                          era=era_of(PROFILES[ref], session))


def compute_default_stats(session: Session) -> None:
    """Fill the session's list figures (peak raw/sent tokens, failed calls) from the default
    profile's replay (`default_settings`), which is cached for the session page as well."""
    run = summary_for(session, default_settings(session))
    Session.objects.filter(pk=session.pk).update(
        peak_raw_tokens=run.totals["peak_raw"],
        peak_sent_tokens=run.totals["peak_sent"],
        replay_errors=run.totals["failed"],
    )


def trace_file(session: Session, settings: ReplaySettings, *, summary: bool = False,
               user: Any = None):
    """The SPEC §6 trace of a stored session (as `trace_json`) in a temporary file, rewound:
    a long session's full trace is hundreds of MB, and grows with the square of its calls, so
    it is never held in memory whole (issue 20 item 2). It is a whole replay, so it takes one
    of `user`'s replay slots. The caller closes the file."""
    from ctxsim.pipeline.trace import write_trace

    rep, calibration = _trace_replay(session, settings)
    out = tempfile.TemporaryFile()  # noqa: SIM115 (handed to the response, which closes it)
    try:
        with replay_slot(user):
            write_trace(rep, out, summary=summary, calibration=calibration)
        out.write(b"\n")
        out.seek(0)
    except BaseException:
        out.close()
        raise
    return out


def trace_json(session: Session, settings: ReplaySettings, *, summary: bool = False) -> str:
    """The SPEC §6 trace of a stored session, exactly what `simulate` prints for its file."""
    from ctxsim.pipeline.trace import build_trace

    rep, calibration = _trace_replay(session, settings)
    trace = build_trace(rep, summary=summary, calibration=calibration)
    return json.dumps(trace, ensure_ascii=False) + "\n"


def _trace_replay(session: Session, settings: ReplaySettings):
    """The replay a trace renders, and its calibration: the summary's when this replay has
    one stored, so both agree exactly."""
    from ctxsim.pipeline.trace import AUTO

    rc = settings.run_config()
    rep = replay(canonical_session(session, settings.counter), rc, sink=MemorySpillSink())
    run = _stored_run(session, ReplayKey.of(session, settings.key))
    calibration = Calibration.from_json(run.totals.get("calibration")) if run else AUTO
    return rep, calibration


def call_is_at_hand(session: Session, settings: ReplaySettings, index: int) -> bool:
    """Whether call `index` needs no replay in this process: kept by the summary replay, or
    one step from the replay paused here."""
    key = ReplayKey.of(session, settings.key)
    kept = REPLAYS.kept.get(key)
    if kept is not None and index in kept[0]:
        return True
    live = REPLAYS.live.get(key)
    return live is not None and live.last is not None and (
        live.last.call_index in (index, index - 1) or index in (live.passed or ()))
