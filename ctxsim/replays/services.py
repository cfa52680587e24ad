"""Replays of stored sessions: settings from a request, the cached summary, one call's detail.

The session page's state (profile, stage list, parameter values, selected call) lives in the
URL. `settings_from_query` turns a query (GET or POST) into `ReplaySettings`, reporting bad
values per field; `summary_for` returns the cached per-call summary, replaying on a miss;
`call_detail` replays up to one call and returns everything the call view shows.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import IntegrityError, connection, transaction
from django.http import Http404

from ctxsim.pipeline.params import PARAMS, ParamError
from ctxsim.pipeline.profiles import DEFAULT_PROFILE, PROFILES, Profile, RunConfig, resolve
from ctxsim.pipeline.registry import PHASES, STAGES, params_of
from ctxsim.pipeline.replay import CallResult, Replay
from ctxsim.pipeline.spill import NullSpillSink, SpillSink
from ctxsim.pipeline.tokens import get_counter
from ctxsim.replays import analysis
from ctxsim.replays.models import (
    DerivedTokenCount,
    ReplayRun,
    SavedProfile,
    SpilledFile,
    storage_name_for,
)
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.store import load_session, prime_token_counts, save_token_counts


def insert_rows(model, fields: Sequence[str], rows: Sequence[tuple], *,
                ignore_conflicts: bool = False) -> None:
    """INSERT plain value tuples into `model`'s table with one `executemany` (pipelined by
    psycopg). A replay stores hundreds of spill rows; `bulk_create` spent half its time
    building model instances for them. Rows that break a unique constraint are skipped with
    `ignore_conflicts` (ON CONFLICT DO NOTHING: PostgreSQL and SQLite alike)."""
    if not rows:
        return
    meta = model._meta
    quote = connection.ops.quote_name
    columns = ", ".join(quote(meta.get_field(f).column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)


# Bump when the engine's output for the same settings changes, so cached replays are redone.
ENGINE_VERSION = "2"


class StorageSpillSink(SpillSink):
    """Spill bytes go to Django's default storage, once per distinct content (by SHA-256).

    ChatCLI re-spills the same result at every call, so a replay remembers what it stored
    rather than asking the storage again each time."""

    def __init__(self) -> None:
        self._stored: set[str] = set()
        self._digests: dict[bytes, str] = {}

    def sha256(self, data: bytes) -> str:
        """The content's SHA-256, computed once per distinct content in this replay."""
        digest = self._digests.get(data)
        if digest is None:
            digest = self._digests[data] = hashlib.sha256(data).hexdigest()
        return digest

    def _store(self, directory: str, name: str, data: bytes) -> None:
        target = storage_name_for(self.sha256(data))
        if target in self._stored:
            return
        if not default_storage.exists(target):
            default_storage.save(target, ContentFile(data))
        self._stored.add(target)


@dataclass
class ReplaySettings:
    """What decides a replay: a profile (built-in or saved), an optional stage list, overrides."""

    profile_ref: str = DEFAULT_PROFILE
    profile: Profile = field(default_factory=lambda: PROFILES[DEFAULT_PROFILE])
    stages: tuple[tuple[str, str], ...] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    saved: SavedProfile | None = None

    def run_config(self) -> RunConfig:
        return resolve(self.profile, self.config, self.stages)

    @property
    def effective_stages(self) -> tuple[tuple[str, str], ...]:
        return self.stages if self.stages is not None else self.profile.stages

    def query(self, call: int | None = None) -> str:
        """The canonical URL query for this state (only what differs from the profile)."""
        params: list[tuple[str, str]] = [("profile", self.profile_ref)]
        if self.stages is not None:
            params.append(("stages", ",".join(f"{s}:{p}" for s, p in self.stages)))
        for name, value in sorted(self.config.items()):
            params.extend(_encode_param(name, value))
        if call is not None:
            params.append(("call", str(call)))
        return urlencode(params)


def saved_profile_as_profile(saved: SavedProfile) -> Profile:
    base = PROFILES.get(saved.base, PROFILES[DEFAULT_PROFILE])
    params = {**base.params, **(saved.params or {})}
    stages = tuple(tuple(e) for e in saved.stages)
    return Profile(saved.name, saved.description, stages, params)


def profile_choices(team) -> list[tuple[str, str]]:
    built_in = [(name, name) for name in PROFILES]
    saved = [(p.ref, f"{p.name} (team)") for p in SavedProfile.objects.filter(team=team)]
    return built_in + saved


# --- parsing the form / URL ------------------------------------------------------------------


def _is_flag(name: str) -> bool:
    """A true/false parameter (the agent stages' booleans; not clear_tool_inputs)."""
    return isinstance(PARAMS[name].default, bool) and name != "clear_tool_inputs"


def _encode_agent_param(name: str, value: Any) -> list[tuple[str, str]] | None:
    """The form text of the SPEC-agents parameters whose values are not plain text."""
    if _is_flag(name):
        return [(name, "true" if value else "false")]
    if name == "thinking_keep" and value == "all":
        return [(f"{name}.type", "all")]
    if name == "cc_persist_overrides":
        return [(name, ",".join(f"{k}={'null' if v is None else v}"
                                for k, v in sorted(value.items())))]
    return None


def _decode_agent_param(name: str, query: Mapping[str, Any],
                        errors: dict[str, str]) -> tuple[bool, Any] | None:
    """The inverse of `_encode_agent_param`, plus decimal numbers (None: not one of them)."""
    spec = PARAMS[name]
    if name == "thinking_keep" and query.get(f"{name}.type") == "all":
        return True, "all"
    if not (_is_flag(name) or spec.kind == "number" or name == "cc_persist_overrides"):
        return None
    if name not in query:
        return False, None
    text = (query.get(name) or "").strip()
    if _is_flag(name):
        return True, {"true": True, "false": False}.get(text.lower(), text)
    if spec.kind == "number":
        try:
            number = float(text)
        except ValueError:
            return True, text
        return True, int(number) if number.is_integer() and "." not in text else number
    pairs: dict[str, Any] = {}
    for part in _split(text):
        key, sep, raw = part.partition("=")
        if not sep or not key.strip():
            errors[name] = f"{part!r}: write each entry as Tool=50000 or Tool=null"
            continue
        raw = raw.strip()
        pairs[key.strip()] = None if raw == "null" else (int(raw) if raw.isdigit() else raw)
    return True, pairs


def _encode_param(name: str, value: Any) -> list[tuple[str, str]]:
    spec = PARAMS[name]
    special = _encode_agent_param(name, value)
    if special is not None:
        return special
    if spec.kind == "env":
        return [(f"env.{k}", v) for k, v in sorted(value.items())]
    if spec.kind == "object" and name != "clear_tool_inputs":
        if value is None:
            return [(f"{name}.type", "none")]
        return [(f"{name}.type", value["type"]), (f"{name}.value", str(value["value"]))]
    if name == "clear_tool_inputs":
        return [(name, "true" if value is True else "false" if value is False
                 else ",".join(value))]
    if spec.kind == "list":
        return [(name, ",".join(value))]
    if spec.kind == "map":
        return [(name, ",".join(f"{k}={v}" for k, v in sorted(value.items())))]
    if value is None:
        return [(name, "")]
    return [(name, str(value))]


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def _int(text: str, field_name: str, errors: dict[str, str]) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        errors[field_name] = f"{text.strip()!r} is not a whole number"
        return None


def _decode_param(name: str, query: Mapping[str, Any], errors: dict[str, str]) -> tuple[bool, Any]:
    """(present, value) of one parameter from form fields; bad text goes to `errors`."""
    spec = PARAMS[name]
    special = _decode_agent_param(name, query, errors)
    if special is not None:
        return special
    if spec.kind == "env":
        prefix = "env."
        values = {k[len(prefix):]: query.get(k) for k in query if k.startswith(prefix)}
        values = {k: v for k, v in values.items() if v not in (None, "")}
        return bool(values) or "env.present" in query, values
    if spec.kind == "object" and name != "clear_tool_inputs":
        kind = query.get(f"{name}.type")
        if kind is None:
            return False, None
        if kind == "none":
            return True, None
        number = _int(query.get(f"{name}.value", ""), name, errors)
        return True, {"type": kind, "value": number}
    if name not in query:
        return False, None
    text = query.get(name) or ""
    if name == "clear_tool_inputs":
        lowered = text.strip().lower()
        if lowered in ("true", "false", ""):
            return True, lowered == "true"
        return True, _split(text)
    if spec.kind == "list":
        return True, _split(text)
    if spec.kind == "map":
        pairs = {}
        for part in _split(text):
            key, sep, value = part.partition("=")
            if not sep or not key.strip() or not value.strip():
                errors[name] = f"{part!r}: write each mapping as Tool=@plugin"
                continue
            pairs[key.strip()] = value.strip()
        return True, pairs
    if spec.kind in ("int", "optional-int"):
        if not text.strip():
            return True, None if spec.kind == "optional-int" else text
        return True, _int(text, name, errors)
    return True, text


def _stages_from_query(query: Mapping[str, Any], profile: Profile, errors: dict[str, str]):
    """The stage list: the form's rows (enable, phase, position), or the `stages` URL text."""
    if "stages.form" in query:
        rows = []
        for name, definition in STAGES.items():
            if query.get(f"stage.{name}") != "on":
                continue
            phase = query.get(f"phase.{name}") or definition.phases[0]
            position = query.get(f"order.{name}") or "0"
            try:
                order = float(position)
            except ValueError:
                errors[f"order.{name}"] = f"{position!r} is not a number"
                order = 0.0
            rank = PHASES.index(phase) if phase in PHASES else 0
            rows.append((rank, order, name, phase))
        entries = tuple((name, phase) for _, _, name, phase in sorted(rows))
    elif query.get("stages") is not None:
        text = query.get("stages") or ""
        entries = tuple(tuple(part.split(":", 1)) for part in _split(text))
        if any(len(e) != 2 for e in entries):
            errors["stages"] = "write stages as stage:phase, separated by commas"
            return None
    else:
        return None
    return None if entries == profile.stages else entries


def settings_from_query(query: Mapping[str, Any], team) -> tuple[ReplaySettings, dict[str, str]]:
    """Parse the page state; returns settings (bad fields fall back to the profile's values)
    and a message per bad field."""
    errors: dict[str, str] = {}
    ref = query.get("profile") or DEFAULT_PROFILE
    saved = None
    if ref.startswith("saved:"):
        pk = ref[6:]
        saved = SavedProfile.objects.filter(team=team, pk=pk).first() if pk.isdigit() else None
        if saved is None:
            errors["profile"] = "no such saved profile in this team"
            ref, profile = DEFAULT_PROFILE, PROFILES[DEFAULT_PROFILE]
        else:
            profile = saved_profile_as_profile(saved)
    elif ref in PROFILES:
        profile = PROFILES[ref]
    else:
        errors["profile"] = f"unknown profile {ref!r}"
        ref, profile = DEFAULT_PROFILE, PROFILES[DEFAULT_PROFILE]
    stages = _stages_from_query(query, profile, errors)
    settings = ReplaySettings(ref, profile, stages, {}, saved)
    try:
        base = resolve(profile, {}, stages)
    except ParamError as exc:
        errors.update(exc.errors)
        settings.stages = None
        base = resolve(profile)
    config: dict[str, Any] = {}
    for name in sorted(params_of(base.stages) | {"counter"}):
        present, value = _decode_param(name, query, errors)
        if present and name not in errors and _normal(value) != _normal(base.values.get(name)):
            config[name] = value
    try:
        resolve(profile, config, settings.stages)
    except ParamError as exc:
        errors.update(exc.errors)
        config = {k: v for k, v in config.items() if k not in exc.errors}
    settings.config = config
    return settings, errors


def _normal(value: Any) -> Any:
    return json.loads(json.dumps(value, default=list, sort_keys=True))


# --- replaying --------------------------------------------------------------------------------


class _Recent:
    """A small map of the latest entries one web process keeps, shared by its request
    threads: the least recently used entry goes when there are more than `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Any:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def pop(self, key: tuple) -> Any:
        with self._lock:
            return self._items.pop(key, None)

    def put(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# Stored sessions never change after import, so each web process keeps the ones it loaded
# last (with, per counter, the last stored derived count handed to it), up to a total size:
# stepping through calls then costs the replay alone, not a reload of every message.
CANONICAL_CACHE_BYTES = django_settings.CTXSIM_SESSION_CACHE_MB * 1024 * 1024
_canonical: OrderedDict[tuple, tuple[Any, dict[str, int]]] = OrderedDict()
_canonical_lock = threading.Lock()


def canonical_session(session: Session, counter_name: str | None = None, *,
                      other_counts: bool = False):
    """The session's canonical messages (cached per process); with `counter_name`, that
    counter is primed with the token counts stored for them, and with `other_counts` also
    with the derived counts other processes stored since this one last looked (a replay about
    to run takes them instead of tokenizing the same previews again)."""
    key = (session.pk, session.created_at, session.message_count, session.total_bytes)
    with _canonical_lock:
        entry = _canonical.get(key)
        if entry is not None:
            _canonical.move_to_end(key)
    if entry is None:
        entry = (load_session(session), {})
        with _canonical_lock:
            _canonical[key] = entry
            # Keys end with the session's size in bytes; the newest entry always stays.
            while len(_canonical) > 1 and sum(k[-1] for k in _canonical) > CANONICAL_CACHE_BYTES:
                _canonical.popitem(last=False)
    canonical, seen = entry  # seen: counter name -> the last DerivedTokenCount id taken
    if counter_name is not None and (counter_name not in seen or other_counts):
        counter = get_counter(counter_name)
        if counter_name not in seen:
            prime_token_counts(session, canonical, counter)
        last = seen.get(counter_name, 0)
        rows = DerivedTokenCount.objects.filter(
            session=session, counter=counter_name, pk__gt=last
        ).order_by("pk").values_list("pk", "digest", "tokens")
        pairs = []
        for pk, digest, tokens in rows:
            pairs.append((bytes.fromhex(digest), tokens))
            last = pk
        counter.prime_digests(pairs)
        seen[counter_name] = last
    return canonical


def warm_up(sessions: int | None = None) -> int:
    """Load what every request needs before serving any: the default counter's encoding and
    the newest `sessions` sessions (CTXSIM_WARM_SESSIONS by default) with their token counts,
    within half the session cache.

    gunicorn runs this once in its master (`deploy/gunicorn.conf.py`, with the app preloaded),
    so every worker starts with it instead of all of them paying for it under the first
    requests. Returns how many sessions it loaded; closes its database connections, which
    must not be shared with the forked workers."""
    from django.db import connections

    if sessions is None:
        sessions = django_settings.CTXSIM_WARM_SESSIONS
    counter = ReplaySettings().run_config().values["counter"]
    get_counter(counter).count(b"warm")  # loads the BPE table
    loaded, budget = 0, CANONICAL_CACHE_BYTES // 2
    try:
        for row in Session.objects.filter(parent__isnull=True).order_by("-created_at")[:sessions]:
            if row.total_bytes > budget:
                break
            budget -= row.total_bytes
            canonical_session(row, counter)
            loaded += 1
    finally:
        connections.close_all()
    return loaded


def _save_derived_counts(session: Session, counter) -> None:
    """Store what this replay had to tokenize, for the other processes (see the model)."""
    fresh = counter.take_fresh()
    if fresh:
        insert_rows(DerivedTokenCount, ("session", "counter", "digest", "tokens"),
                    [(session.pk, counter.name, d.hex(), t) for d, t in fresh.items()],
                    ignore_conflicts=True)


def cache_key(rc: RunConfig) -> str:
    values = {k: v for k, v in rc.values.items() if not k.startswith("_")}
    blob = json.dumps(
        {"v": ENGINE_VERSION, "stages": rc.stages, "values": values},
        sort_keys=True, default=list,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def new_replay(canonical, rc: RunConfig, sink: SpillSink | None = None) -> Replay:
    return Replay(canonical.messages, rc, sink or NullSpillSink(), canonical.tools,
                  canonical.response_schema)


def summary_for(session: Session, settings: ReplaySettings, keep: int | None = None) -> ReplayRun:
    """The cached replay summary for these settings; replays and stores it on a miss.

    On a miss the replay passes every call anyway, so it keeps the call a page is about to
    show (`keep`, or the one that sent the most, the page's default) for `call_detail`.
    """
    rc = settings.run_config()
    key = cache_key(rc)
    cached = _stored_run(session, key)
    if cached is not None:
        return cached
    # Reviewers of one session often try the same value at once: within a process the first
    # request replays and the others wait for its result instead of replaying too.
    with _replaying(session.pk, key):
        cached = _stored_run(session, key)
        if cached is not None:
            return cached
        run = _replay_and_store(session, settings, rc, key, keep)
        _remember_run(session, run)
        return run


# Stored summaries never change once written, and every step of a call view needs its
# session's: each process keeps the latest few instead of reading and decoding them again.
_runs = _Recent(64)


def _stored_run(session: Session, key: str) -> ReplayRun | None:
    run = _runs.get((session.pk, session.created_at, key))
    if run is None:
        run = ReplayRun.objects.filter(session=session, key=key).first()
        if run is not None:
            _remember_run(session, run)
    return run


def _remember_run(session: Session, run: ReplayRun) -> None:
    _runs.put((session.pk, session.created_at, run.key), run)


_replay_locks: dict[tuple, threading.Lock] = {}
_replay_locks_guard = threading.Lock()


@contextmanager
def _replaying(session_id: int, key: str):
    with _replay_locks_guard:
        lock = _replay_locks.setdefault((session_id, key), threading.Lock())
    with lock:
        yield
    with _replay_locks_guard:
        # A late waiter may still hold this lock object; at worst two replays run, as before.
        if not lock.locked():
            _replay_locks.pop((session_id, key), None)


def _replay_and_store(session: Session, settings: ReplaySettings, rc: RunConfig, key: str,
                      keep: int | None) -> ReplayRun:
    canonical = canonical_session(session, rc.values["counter"], other_counts=True)
    counter = get_counter(rc.values["counter"])
    sink = StorageSpillSink()
    rep = new_replay(canonical, rc, sink)
    calls, kept, peak = [], None, None
    for call in rep.calls():
        calls.append(analysis.call_summary(call))
        if call.call_index == keep:
            kept = call
        if peak is None or call.sent_tokens >= peak.sent_tokens:
            peak = call
    for call in (kept, peak):
        if call is not None:
            _remember_call(session, key, call, rep)
    save_token_counts(session, canonical, counter)
    _save_derived_counts(session, counter)
    totals = analysis.totals(calls)
    totals["notes"] = analysis.notes(calls, rc.values, rc.stages, canonical.messages)
    totals["warnings"] = list(rc.warnings)
    try:
        with transaction.atomic():
            run = ReplayRun.objects.create(
                session=session, key=key, profile=settings.profile.name,
                stages=[list(e) for e in rc.stages], config=rc.effective_config(),
                counter=rc.values["counter"], calls=calls, totals=totals,
            )
            insert_rows(SpilledFile, ("run", "seq", "name", "path", "created_in_call", "size",
                                      "sha256"), [
                (run.pk, n, s.name, s.path, s.created_in_call, s.size, sink.sha256(s.content))
                for n, s in enumerate(rep.spilled_files)
            ])
    except IntegrityError:  # the same replay was stored concurrently
        run = ReplayRun.objects.get(session=session, key=key)
    return run


@dataclass
class CallDetail:
    call: CallResult
    view: analysis.CallView


@dataclass
class _LiveReplay:
    """A replay paused after yielding call `last.call_index`, ready to go on."""

    replay: Replay
    calls: Any  # the replay's generator
    last: CallResult


# Reviewers step through calls one after the other: each process keeps replays paused where
# the last request left them, so the next call costs one step, not a replay from the start
# (enough for the reviewers one process serves at once; each holds its spilled contents). A
# request takes the paused replay out of the cache while it uses it, so two threads never
# advance the same generator.
_live = _Recent(32)
# Calls a summary replay kept for the request that made it (see `summary_for`).
_kept = _Recent(64)


def forget_replayed_calls() -> None:
    """Drop the replays this process keeps paused or kept, and its recent stored summaries
    (not the loaded sessions, nor the token counts): as if another worker process served the
    next request."""
    _live.clear()
    _kept.clear()
    _runs.clear()


def _remember_call(session: Session, run_key: str, call: CallResult, rep: Replay) -> None:
    _kept.put((session.pk, session.created_at, run_key, call.call_index), (call, rep))


def _replay_to(session: Session, rc: RunConfig, index: int) -> tuple[CallResult, Replay]:
    key = (session.pk, session.created_at, cache_key(rc))
    kept = _kept.get((*key, index))
    if kept is not None:
        return kept
    live = _live.pop(key)
    if live is None or live.last.call_index > index:
        rep = new_replay(canonical_session(session, rc.values["counter"], other_counts=True), rc)
        live = _LiveReplay(rep, rep.calls(), None)  # type: ignore[arg-type]
    while live.last is None or live.last.call_index < index:
        nxt = next(live.calls, None)
        if nxt is None:
            raise IndexError(index)
        live.last = nxt
    _live.put(key, live)
    return live.last, live.replay


def call_detail(
    session: Session, settings: ReplaySettings, run: ReplayRun, index: int
) -> CallDetail:
    """Replay up to call `index` and align what was sent with the raw history."""
    rc = settings.run_config()
    chosen, rep = _replay_to(session, rc, index)
    capped = {d["input_index"] for d in rep.dispatch if d.get("stored_len") != d.get("input_len")}
    view = analysis.call_view(chosen, get_counter(rc.values["counter"]), capped)
    spills = {s.name: s for s in run.spills.filter(created_in_call=index)}
    for row in view.rows:
        if row.spill is not None:
            row.spill = spills.get(row.spill.name)
    return CallDetail(chosen, view)


def compute_default_stats(session: Session) -> None:
    """Fill the session's list figures (peak raw/sent tokens, failed calls) from the default
    profile's replay, which is cached for the session page as well."""
    run = summary_for(session, ReplaySettings())
    Session.objects.filter(pk=session.pk).update(
        peak_raw_tokens=run.totals["peak_raw"],
        peak_sent_tokens=run.totals["peak_sent"],
        replay_errors=run.totals["failed"],
    )


# --- traces and spilled files -----------------------------------------------------------------


def trace_json(session: Session, settings: ReplaySettings, *, summary: bool = False) -> str:
    """The SPEC §6 trace of a stored session, exactly what `simulate` prints for its file."""
    from ctxsim.pipeline.spill import MemorySpillSink
    from ctxsim.pipeline.trace import build_trace

    rc = settings.run_config()
    rep = new_replay(canonical_session(session, rc.values["counter"]), rc, MemorySpillSink())
    return json.dumps(build_trace(rep, summary=summary), ensure_ascii=False) + "\n"


def spill_bytes(spill: SpilledFile) -> bytes:
    """The spilled file's bytes; Http404 when storage lost them (e.g. a bucket was cleaned)."""
    try:
        with default_storage.open(spill.storage_name, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise Http404("This spilled file is no longer in storage.") from None


def spill_lines(data: bytes, start: str | None, end: str | None) -> dict[str, Any]:
    """Numbered lines of a spilled file, limited to [start, end] (1-based, inclusive) when
    given; bad bounds are reported, not fatal."""
    from ctxsim.pipeline.messages import decode_for_display

    lines = decode_for_display(data).split("\n")
    total = len(lines)
    problems = []

    def bound(text: str | None, default: int, name: str) -> int:
        if text in (None, ""):
            return default
        if not text.strip().isdigit() or int(text) < 1:
            problems.append(f"{name} must be a line number from 1 to {total}")
            return default
        return min(int(text), total)

    first = bound(start, 1, "start")
    last = bound(end, total, "end")
    if first > last:
        problems.append("start is after end")
        first, last = 1, total
    return {
        "lines": list(enumerate(lines[first - 1 : last], start=first)),
        "total_lines": total,
        "first": first,
        "last": last,
        "ranged": (first, last) != (1, total),
        "problems": problems,
        "size": len(data),
    }


@dataclass
class Side:
    ref: str
    settings: ReplaySettings
    run: ReplayRun


def compare_sides(session: Session, a: str | None, b: str | None):
    """The two replays of a comparison (defaults: chatcli against none)."""
    errors: dict[str, str] = {}
    sides = []
    for key, ref, default in (("a", a, DEFAULT_PROFILE), ("b", b, "none")):
        settings, problems = settings_from_query({"profile": ref or default}, session.team)
        if problems:
            errors[key] = problems.get("profile", "bad profile")
        sides.append(Side(settings.profile_ref, settings,
                          summary_for(session, settings)))
    return sides, errors


# --- team profiles: save, export, import ------------------------------------------------------

IMPORT_BASES = {"chatcli": "chatcli", "aivax": "aivax", "anthropic": "anthropic-clear-tool-uses",
                "claude-code": "claude-code"}


class ProfileError(ValueError):
    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))


def _check_name(team, name: str, description: str) -> dict[str, str]:
    errors = {}
    if not name.strip():
        errors["name"] = "give the profile a name"
    elif len(name) > 80:
        errors["name"] = "80 characters at most"
    elif name.strip() in PROFILES:
        errors["name"] = "that is the name of a built-in profile"
    elif SavedProfile.objects.filter(team=team, name=name.strip()).exists():
        errors["name"] = "the team already has a profile with this name"
    if len(description) > 2000:
        errors["description"] = "2000 characters at most"
    return errors


def save_profile(team, user, settings: ReplaySettings, name: str, description: str = ""):
    """Store the page's current settings as a named team profile."""
    errors = _check_name(team, name, description)
    if errors:
        raise ProfileError(errors)
    base = settings.saved.base if settings.saved else settings.profile.name
    base_profile = PROFILES.get(base, PROFILES[DEFAULT_PROFILE])
    params = {**settings.profile.params, **settings.config}
    params = {k: v for k, v in params.items()
              if _normal(v) != _normal(base_profile.params.get(k, PARAMS[k].default))}
    return SavedProfile.objects.create(
        team=team, name=name.strip(), description=description.strip(), base=base_profile.name,
        stages=[list(e) for e in settings.effective_stages], params=_normal(params),
        created_by=user,
    )


def import_profile(team, user, tool: str, text: str, name: str, description: str = ""):
    """A team profile from a tool's own configuration pasted as text (SPEC §4)."""
    from ctxsim.pipeline.export import IMPORTERS

    errors = _check_name(team, name, description)
    if tool not in IMPORTERS:
        errors["format"] = f"choose one of {', '.join(IMPORTERS)}"
    if not text.strip():
        errors["text"] = "paste the configuration to import"
    if errors:
        raise ProfileError(errors)
    try:
        values = IMPORTERS[tool](text)
    except ParamError as exc:
        raise ProfileError({f"text ({k})": v for k, v in exc.errors.items()}) from None
    base = PROFILES[IMPORT_BASES[tool]]
    stages = base.stages
    if tool == "anthropic" and ("compact_trigger" in values or "thinking_keep" in values):
        # A request fragment with the SPEC-agents edits: exactly the stages it configures.
        from ctxsim.pipeline.export import anthropic_stages

        base, stages = PROFILES["anthropic-context-management"], anthropic_stages(values)
    return SavedProfile.objects.create(
        team=team, name=name.strip(), description=description.strip(), base=base.name,
        stages=[list(e) for e in stages], params=_normal({**base.params, **values}),
        created_by=user,
    )


def exports_for(settings: ReplaySettings):
    from ctxsim.pipeline.export import export_profile

    return export_profile(settings.run_config())
