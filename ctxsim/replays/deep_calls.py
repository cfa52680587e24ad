"""Deep call views of long sessions, handed to the worker (issue 28 item 4, its last part).

A session longer than CTXSIM_INLINE_REPLAY_CALLS has its summary replayed by the worker
(`ctxsim.replays.background`). What the call view shows of one call needs a replay up to that
call, which a web process has at hand only for a call its summary replay kept or one step from
the replay it left paused (`services.call_is_at_hand`). Anything else — a cold jump to
`?call=N`, a fold's rows (`from`/`to`), a message's whole body or its change, a Find's rows, a
folded message shown for its comment — would replay N calls inside the request. Here it is
handed to the worker instead:

- **One job per thing shown.** A `CallReplay` row per (session, settings, call, part), where
  the part is what is shown (`PACK`, `ROWS`, `BODY`, `FIND`), created in the transaction that
  queues its task; it counts against the quotas (`ctxsim.jobs.policy`, kind "call"), and an
  identical request joins it. The request raises `CallPending`; the views answer with
  `ctxsim.replays.pending.call_pending`, which polls.
- **The worker** replays to the call (writing its progress), makes the part with the very
  functions the inline path uses (so it renders the same), and keeps it on the row,
  compressed: every web process reads it there whatever Django's cache is (the default
  local-memory cache is per process) and then from its own cache. A call pack is put into
  Django's cache as every call pack is, and the worker also makes the packs of the calls
  around it (`BEFORE`, `AFTER`), so stepping on from a deep call stays instant.
- **Its life** is every job's (`ctxsim.jobs.lifecycle`: a lost worker's job is queued again
  once, then failed); a failed one is tried again when asked after the import timeout. Rows
  finished more than `KEEP_SECONDS` ago are deleted when the session queues another, but for
  the views a stored summary replay kept around its landing call.

Short sessions, and calls at hand, are made inline as before.
"""

from __future__ import annotations

import hashlib
import json
import pickle  # noqa: S403 - only what this module's worker wrote is read back
import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.core.cache import cache as django_cache
from django.db import IntegrityError, transaction
from django.http import QueryDict
from django.tasks import task
from django.urls import reverse
from django.utils import timezone

from ctxsim.jobs import lifecycle, policy
from ctxsim.jobs.models import Status
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.replays import analysis, background, call_view, page, services
from ctxsim.replays.cache import CALL_PACK_SECONDS, REPLAYS, LiveReplay, ReplayKey, releases_memory
from ctxsim.replays.models import CallReplay, ReplayRun
from ctxsim.replays.state import ReplaySettings, session_settings
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.terms import Terms

PACK, ROWS, BODY, FIND = "pack", "rows", "body", "find"
# A call pack made by the worker comes with the packs of the calls just before and after it
# (a step costs the worker a fraction of the replay to the first).
BEFORE, AFTER = services.KEPT_BEFORE, services.KEPT_AFTER
# While a call the worker made is read, the next call view missing this close on either side
# is asked of the worker (its replay to it takes seconds on a long session): as far as a job
# makes ahead, so a reader stepping one call every two seconds finds the next ones made.
AHEAD = AFTER
# What a message's body is asked as: the whole text, the collapsed one, the change.
BODY_KEYS = ("full", "head", "diff")
KEEP_SECONDS = CALL_PACK_SECONDS
HEARTBEAT_EVERY = 1.0
VERSION = 1  # bump when what a part holds changes shape


class CallPending(Exception):
    """The call is replayed in the worker: the request shows its progress instead."""

    def __init__(self, row: CallReplay) -> None:
        super().__init__(row)
        self.row = row


def deferred(session: Session, settings: ReplaySettings, index: int) -> bool:
    """Whether call `index` is the worker's to replay: a long session's call that no replay
    of this process holds."""
    return (session.model_call_count > background.inline_bound()
            and not services.call_is_at_hand(session, settings, index))


# --- what the views ask for -----------------------------------------------------------------


def call_pack(session: Session, settings: ReplaySettings, run: ReplayRun, index: int,
              user: Any = None) -> call_view.CallPack:
    """`call_view.call_pack`, from the worker for a deep call of a long session."""
    if not deferred(session, settings, index):
        return call_view.call_pack(session, settings, run, index, user)
    # The worker's bytes as its row holds them (a pack read from the row is not pickled
    # again for the cache: at 16,000 calls that was a step's slowest part).
    name = REPLAYS.call_pack_name(ReplayKey.of(session, run.key, index),
                                  settings.query()) + ":z"
    data = django_cache.get(name)
    if data is None:
        data = _obtain(session, settings, index, {"what": PACK}, user, remember=False, raw=True)
        django_cache.set(name, data, timeout=CALL_PACK_SECONDS)
    _ahead(session, settings, len(run.calls), index, user)
    return _loads(data)


def _ahead(session: Session, settings: ReplaySettings, calls: int, index: int,
           user: Any) -> None:
    """While call `index` is read, the worker makes the first call view within AHEAD calls on
    each side of it that nothing made or asked for yet, so the next `j` or `k` finds it made,
    or on the way. The job asked for lies past that call in the reader's direction, so the
    calls it makes around itself (BEFORE, AFTER) begin at the missing one: a job per
    BEFORE + AFTER + 1 calls stepped, either way. It takes one of the user's pending tasks
    only while another would still fit: work asked ahead never makes a request the user does
    make refused (and without a user, an API client's read, nothing is asked ahead: no quota
    would bound it)."""
    if policy.user_id(user) is None:
        return
    low, high = max(0, index - AHEAD - AFTER), min(calls - 1, index + AHEAD + BEFORE)
    made = set(CallReplay.objects.filter(
        session=session, key=settings.key, digest=PACK_DIGEST,
        call__range=(low, high)).values_list("call", flat=True))
    sides = [(range(index + 1, min(calls, index + AHEAD + 1)), lambda m: min(high, m + BEFORE)),
             (range(index - 1, max(-1, index - AHEAD - 1), -1), lambda m: max(low, m - AFTER))]
    for side, job_for in sides:
        missing = next((c for c in side if c not in made), None)
        if missing is None or job_for(missing) in made:
            continue  # made, or on the way
        try:
            _pending(session, settings, job_for(missing), PACK_TEXT, PACK_DIGEST, None, user,
                     room=2)
        except policy.QueueFull:
            return


def rows_html(session: Session, settings: ReplaySettings, run: ReplayRun, index: int,
              positions: Sequence[int], user: Any = None,
              reach: Terms | None = None) -> list[tuple[int, int | None, str]]:
    """`call_view.rows_html`, from the worker for a deep call of a long session."""
    if not deferred(session, settings, index):
        return call_view.rows_html(session, settings, run, index, positions, user, reach)
    part = {"what": ROWS, "at": _ranges(positions),
            "reach": [list(t) for t in reach.terms] if reach is not None else None}
    return _obtain(session, settings, index, part, user)


def search_rows(session: Session, settings: ReplaySettings, run: ReplayRun, index: int,
                text: str, user: Any = None) -> set[int]:
    """`call_view.search_rows` of call `index`, from the worker for a deep call."""
    if not deferred(session, settings, index):
        return call_view.search_rows(services.call_detail(session, settings, run, index, user),
                                     text)
    return set(_obtain(session, settings, index, {"what": FIND, "q": text}, user))


def message_body(session: Session, settings: ReplaySettings, run: ReplayRun, index: int,
                 position: int, keys: Iterable[str], user: Any = None) -> dict | None:
    """`body_parts` of one message of call `index` (None: the call has no such row), from
    the worker (every key at once) for a deep call of a long session."""
    if not deferred(session, settings, index):
        return body_parts(services.call_detail(session, settings, run, index, user), position,
                          keys)
    return _obtain(session, settings, index, {"what": BODY, "row": position}, user)


def body_parts(detail: services.CallDetail, position: int,
               keys: Iterable[str]) -> dict[str, Any] | None:
    """What "show all", "show less" and "show the change" show of one row: `full` and `head`
    as (text, hidden bytes), `diff` as `page.diff_entry` (None when the row was not rewritten
    before this call). None when the call has no such row."""
    if position >= len(detail.view.rows):
        return None
    row = detail.view.rows[position]
    out: dict[str, Any] = {}
    if "diff" in keys:
        changed = row.raw is not None and row.status != "removed"
        out["diff"] = page.diff_entry(row.diff or analysis.content_diff(
            row.raw.content, row.message.content)) if changed and row.raw is not None else None
    quiet = row.status == "unchanged" or row.carried
    for key in ("full", "head"):
        if key in keys:
            limit = page.COLLAPSE_UNCHANGED_BYTES if quiet else page.COLLAPSE_BYTES
            out[key] = analysis.display(page.tool_output(row.message)[0],
                                        limit if key == "head" else None)
    return out


def address(row: CallReplay) -> tuple[str, tuple[str, ...]]:
    """Where the part of `row` is shown, from its own fields (the poll's result,
    `ctxsim.jobs.poll`): the URL that asks for it and the URL names of the pages that may show
    it. A message's body: its own address ("show all"); a fold's rows (one run, no reach):
    the rows' page; anything else (a call pack, a Find's rows, the rows a filter or a comment
    shows): the call on the session page."""
    part = json.loads(row.part)
    query = "&".join(q for q in (row.query, f"call={row.call}") if q)
    args = [row.session_id]
    if part.get("what") == BODY:
        return (f"{reverse('session-message', args=args)}?{query}&row={int(part['row'])}",
                ("session-message",))
    call = f"{reverse('session-detail', args=args)}?{query}"
    if part.get("what") != ROWS:
        return call, ("session-detail",)
    if part.get("reach") is None and len(part.get("at", ())) == 1:
        start, stop = (int(p) for p in part["at"][0])
        call = f"{reverse('session-rows', args=args)}?{query}&from={start}&to={stop}"
    return call, ("session-rows", "session-detail")


def _ranges(positions: Iterable[int]) -> list[list[int]]:
    """Positions as sorted [start, end) runs (a fold's rows are one run)."""
    runs: list[list[int]] = []
    for p in sorted(set(positions)):
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    return runs


# --- the job ----------------------------------------------------------------------------------


def _text(part: dict[str, Any]) -> str:
    return json.dumps(part, sort_keys=True, separators=(",", ":"))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


PACK_TEXT = _text({"what": PACK})  # a call pack's part, as its rows hold it
PACK_DIGEST = _digest(PACK_TEXT)


def _obtain(session: Session, settings: ReplaySettings, index: int, part: dict[str, Any],
            user: Any, *, remember: bool = True, raw: bool = False) -> Any:
    """What the worker made of `part` at call `index` (with `raw`, as the row holds it): from
    this process's cache, else from its row (then cached); CallPending with the row queued
    (or joined) when it is not made."""
    text = _text(part)
    digest = _digest(text)
    name = "ctxsim:deep:" + _digest(f"{VERSION}|{session.pk}|{session.created_at.isoformat()}|"
                                    f"{settings.key}|{index}|{digest}")
    if remember and (hit := django_cache.get(name)) is not None:
        return hit[0]
    row = CallReplay.objects.filter(session=session, key=settings.key, call=index,
                                    digest=digest).first()
    if row is not None and row.status == Status.DONE and row.result:
        if raw:
            return bytes(row.result)
        value = _loads(row.result)
        if remember:
            django_cache.set(name, (value,), timeout=KEEP_SECONDS)
        return value
    raise CallPending(_pending(session, settings, index, text, digest, row, user))


def _pending(session: Session, settings: ReplaySettings, index: int, text: str, digest: str,
             row: CallReplay | None, user: Any, *, room: int = 1) -> CallReplay:
    """The row the request waits for: queued now, joined, or queued again (lost, or failed
    longer than the import timeout ago). A new row is admitted while `room` more of the
    user's tasks would fit (QueueFull otherwise)."""
    if row is None:
        policy.admit("call", user, session.team, tasks=room)
        _forget_old(session)
        with transaction.atomic():
            row, created = CallReplay.objects.get_or_create(
                session=session, key=settings.key, call=index, digest=digest,
                defaults={"query": settings.query(), "part": text, "total": index + 1,
                          "user_id": policy.user_id(user)})
            if created:
                enqueue(row)
        return row
    if row.status == Status.RUNNING and lifecycle.settle(among=[row]):
        row.refresh_from_db()  # its worker went away: queued again (or, lost twice, failed)
    elif row.status == Status.DONE or (row.status in (Status.FAILED, Status.CANCELLED)
                                       and background.older(row.finished_at)):
        _queue_again(row, row.status, user)
    return row


def _forget_old(session: Session) -> None:
    """The session's call views finished more than KEEP_SECONDS ago, but for those a summary
    replay kept around its landing call (no user's: `keep_default_call`) while that summary is
    stored: a long session opened after a day would otherwise wait for the worker again."""
    stored = ReplayRun.objects.filter(session=session).values("key")
    CallReplay.objects.filter(
        session=session, status__in=(Status.DONE, Status.FAILED, Status.CANCELLED),
        finished_at__lt=timezone.now() - timedelta(seconds=KEEP_SECONDS),
    ).exclude(user_id=None, status=Status.DONE, key__in=stored).delete()


def _queue_again(row: CallReplay, was: str, user: Any) -> None:
    """Queued again once however many requests find it at the same moment."""
    policy.admit("call", user, row.session.team)
    lifecycle.reopen(row, was, user, result=b"")


def enqueue(row: CallReplay) -> None:
    """Its task (first queued, queued again by a request, or by `ctxsim.jobs.lifecycle`)."""
    result = replay_call.enqueue(row.pk)
    CallReplay.objects.filter(pk=row.pk).update(task_id=str(result.id)[:64])
    row.task_id = str(result.id)[:64]


class _Compressed:
    """A file `pickle.dump` writes into, compressed as it comes: a part's pickle (megabytes
    for a late call of a long session) is never held whole beside the part."""

    def __init__(self) -> None:
        self._zip = zlib.compressobj(6)
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._parts.append(self._zip.compress(data))

    def getvalue(self) -> bytes:
        return b"".join([*self._parts, self._zip.flush()])


def _dumps(value: Any) -> bytes:
    out = _Compressed()
    pickle.dump(value, out, protocol=pickle.HIGHEST_PROTOCOL)
    return out.getvalue()


def _loads(data: Any) -> Any:
    return pickle.loads(zlib.decompress(bytes(data)))  # noqa: S301 - written by _dumps


# --- the worker's side ------------------------------------------------------------------------


@task(queue_name="replays")
@releases_memory
def replay_call(job_id: int) -> dict:
    """Replay a stored session to the call of its `CallReplay` row and keep what it shows."""
    return run_call_replay(job_id)


def run_call_replay(job_id: int) -> dict:
    return lifecycle.run(CallReplay, _work, every=HEARTBEAT_EVERY, pk=job_id)


def _work(row: CallReplay, attempt: lifecycle.Attempt) -> dict:
    session = row.session
    settings, _ = session_settings(QueryDict(row.query), session)
    if settings.key != row.key:
        raise ValueError("the settings changed before the call was replayed (a team profile "
                         "was edited or deleted); open the page again")
    run = services.stored_summary(session, settings) or services.summary_for(session, settings)
    part = json.loads(row.part)
    pack = part["what"] == PACK
    first = max(0, row.call - BEFORE) if pack else row.call
    last = min(len(run.calls) - 1, row.call + AFTER) if pack else row.call
    replay_to_call(session, settings, first, attempt.progress)
    value = None
    for index in range(first, last + 1):
        if index == row.call:
            value = _make(part, session, settings, run, index)
        else:
            _keep_neighbour(row, index, call_view.make_pack(session, settings, run, index))
    attempt.finish(Status.DONE, done=row.call + 1, result=_dumps(value))
    return {"status": "done", "call": row.call}


def replay_to_call(session: Session, settings: ReplaySettings, index: int,
                   progress: Callable[[int], None]) -> None:
    """Replay up to call `index` in this (the worker's) process, saying how far it got after
    each call, and leave the replay paused there: `services.call_detail` goes on from it."""
    canonical = services.canonical_session(session, settings.counter, other_counts=True)
    rep = replay(canonical, settings.run_config(), sink=NullSpillSink())
    live = LiveReplay(rep, rep.calls())
    for call in live.calls:
        live.last = call
        progress(call.call_index + 1)
        if call.call_index >= index:
            break
    REPLAYS.live.put(ReplayKey.of(session, settings.key), live)


def _make(part: dict[str, Any], session: Session, settings: ReplaySettings, run: ReplayRun,
          index: int) -> Any:
    """What the inline path makes of `part`, by the same functions."""
    what = part["what"]
    if what == PACK:  # the web process caches it when it reads the row (`call_pack`)
        return call_view.make_pack(session, settings, run, index)
    if what == ROWS:
        reach = Terms(tuple(tuple(t) for t in part["reach"])) if part["reach"] else None
        positions = [p for start, end in part["at"] for p in range(start, end)]
        return call_view.rows_html(session, settings, run, index, positions, reach=reach)
    detail = services.call_detail(session, settings, run, index)
    if what == FIND:
        return sorted(call_view.search_rows(detail, part["q"]))
    if what == BODY:
        return body_parts(detail, part["row"], BODY_KEYS)
    raise ValueError(f"no such part of a call view: {what!r}")


def keep_default_call(session: Session, settings: ReplaySettings, run: ReplayRun) -> None:
    """The call a long session's page opens on (the one that sent the most) and the calls on
    each side of it, made where the summary replay that kept them ran (the worker: an import,
    a background replay) and kept as their done rows, so the page opens on it, and `j` or `k`
    steps from it, without the worker replaying to them again."""
    if session.model_call_count <= background.inline_bound() or not run.calls:
        return
    index = page.selected_call(run, None)
    for at in (index, *range(index - BEFORE, index), *range(index + 1, index + AFTER + 1)):
        if 0 <= at < len(run.calls) and services.call_is_at_hand(session, settings, at):
            _keep_pack(session, settings.key, settings.query(), at,
                       call_view.make_pack(session, settings, run, at), None)


def _keep_neighbour(row: CallReplay, index: int, pack: call_view.CallPack) -> None:
    _keep_pack(row.session, row.key, row.query, index, pack, row.user_id)


def _keep_pack(session: Session, key: str, query: str, index: int, pack: call_view.CallPack,
               user_id: int | None) -> None:
    """A call pack made beside what was asked, kept as that call's own done row (a request
    queued for it meanwhile is answered: its task then finds nothing to do)."""
    now = timezone.now()
    data = _dumps(pack)
    lookup = {"session_id": session.pk, "key": key, "call": index, "digest": PACK_DIGEST}
    if CallReplay.objects.filter(**lookup, status=Status.QUEUED).update(
            status=Status.DONE, result=data, done=index + 1, finished_at=now):
        return
    if CallReplay.objects.filter(**lookup).exists():
        return  # done already, or another worker's
    try:
        with transaction.atomic():
            CallReplay.objects.create(**lookup, query=query, part=PACK_TEXT, result=data,
                                      status=Status.DONE, total=index + 1, done=index + 1,
                                      user_id=user_id, team_id=session.team_id,
                                      started_at=now, finished_at=now)
    except IntegrityError:
        pass  # made by another worker at the same moment
