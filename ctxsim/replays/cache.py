"""What one web process keeps between requests: the only module-level mutable state of the web side.

Stored sessions and replay summaries never change once written, and reviewers step through the
calls of one replay one after the other, so each process keeps the sessions it loaded last, the
summaries it read last, and replays paused where the last request left them, all within one
budget of estimated bytes (CTXSIM_SESSION_CACHE_MB, a `Pool`: past it the least recently used
entry of any kind goes; the estimates are `ctxsim.replays.sizes`). Everything lives in one
`ReplayCache` (`REPLAYS`), keyed by `ReplayKey`; `REPLAYS.clear()` makes the process a fresh
one (tests and benchmarks use it, never the attributes). Call views rendered by any process
are shared through Django's cache (`REPLAYS.call_pack`).
"""
from __future__ import annotations

import ctypes
import gc
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings as django_settings
from django.core.cache import cache as django_cache

from ctxsim.pipeline.messages import Session as CanonicalSession
from ctxsim.pipeline.stages.microcompact import isolated_recall_keys
from ctxsim.pipeline.tokens import isolated_counters
from ctxsim.replays.sizes import replay_bytes, run_bytes


class Pool:
    """One byte budget shared by several `LRU`s: while their entries' total size is over
    `limit`, the least recently used entry of any of them goes (the newest always stays)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple[int, Hashable], tuple[Any, int]] = OrderedDict()
        self._totals: dict[int, int] = {}
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        """The estimated bytes held by every part."""
        with self._lock:
            return sum(self._totals.values())

    def part_total(self, part: int) -> int:
        with self._lock:
            return self._totals.get(part, 0)

    def get(self, key: tuple[int, Hashable]) -> Any:
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            self._items.move_to_end(key)
            return entry[0]

    def pop(self, key: tuple[int, Hashable]) -> Any:
        with self._lock:
            entry = self._items.pop(key, None)
            if entry is None:
                return None
            self._totals[key[0]] -= entry[1]
            return entry[0]

    def put(self, key: tuple[int, Hashable], value: Any, size: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._totals[key[0]] -= old[1]
            self._items[key] = (value, size)
            self._totals[key[0]] = self._totals.get(key[0], 0) + size
            self._evict()

    def remeasure(self, key: tuple[int, Hashable], size: Callable[[Any], int]) -> None:
        """Measure `key`'s entry again, in place (it grew since it was put)."""
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return
            now = size(entry[0])
            self._items[key] = (entry[0], now)
            self._totals[key[0]] += now - entry[1]
            self._evict()

    def _evict(self) -> None:
        total = sum(self._totals.values())
        while len(self._items) > 1 and total > self.limit:
            (part, _), (_, dropped) = self._items.popitem(last=False)
            self._totals[part] -= dropped
            total -= dropped

    def items(self, part: int) -> list[tuple[Hashable, Any]]:
        with self._lock:
            return [(k, v) for (p, k), (v, _) in self._items.items() if p == part]

    def clear(self, part: int) -> None:
        with self._lock:
            for key in [k for k in self._items if k[0] == part]:
                del self._items[key]
            self._totals[part] = 0


class LRU[V]:
    """A map shared by a process's request threads that drops its least recently used entries
    while their total size is over `limit` (the newest entry always stays). `size` measures an
    entry (1 by default: the limit is a count). Given a `pool`, the limit is the pool's and is
    shared with the pool's other maps."""

    def __init__(self, limit: int = 0, size: Callable[[V], int] | None = None, *,
                 pool: Pool | None = None) -> None:
        self.pool = pool if pool is not None else Pool(limit)
        self._size = size or (lambda value: 1)
        self._part = id(self)

    @property
    def limit(self) -> int:
        return self.pool.limit

    @property
    def total(self) -> int:
        """The estimated size of this map's entries."""
        return self.pool.part_total(self._part)

    def get(self, key: Hashable) -> V | None:
        return self.pool.get((self._part, key))

    def pop(self, key: Hashable) -> V | None:
        return self.pool.pop((self._part, key))

    def put(self, key: Hashable, value: V) -> None:
        self.pool.put((self._part, key), value, self._size(value))

    def remeasure(self, key: Hashable) -> None:
        """Measure `key`'s entry again if it is still here (it grew in place)."""
        self.pool.remeasure((self._part, key), self._size)

    def items(self) -> list[tuple[Hashable, V]]:
        return self.pool.items(self._part)

    def clear(self) -> None:
        self.pool.clear(self._part)


@dataclass(frozen=True)
class ReplayKey:
    """What a kept thing belongs to: a stored session (its id and creation time, since ids are
    reused after a delete), optionally one replay of it (the run key) and one of its calls."""

    session: int
    created: datetime
    run: str = ""
    call: int | None = None

    @classmethod
    def of(cls, session: Any, run: str = "", call: int | None = None) -> ReplayKey:
        return cls(session.pk, session.created_at, run, call)

    def without_call(self) -> ReplayKey:
        return ReplayKey(self.session, self.created, self.run)


@dataclass
class LoadedSession:
    """A stored session's canonical messages, and per counter the id of the last derived
    token count handed to that counter (see `ctxsim.replays.token_counts`)."""

    canonical: CanonicalSession
    size: int
    seen: dict[str, int] = field(default_factory=dict)
    # Counters whose counts of every content this process stored (after a whole replay).
    stored: set[str] = field(default_factory=set)


@dataclass
class LiveReplay:
    """A replay paused after yielding call `last.call_index`, ready to go on; with `passed`,
    every call it yielded so far, by index (a short session's: `services._replay_to`)."""

    replay: Any
    calls: Iterator[Any]  # the replay's generator
    last: Any = None  # the CallResult it yielded last
    passed: dict[int, Any] | None = None

    def held(self) -> Iterable[Any]:
        """The calls it holds."""
        return self.passed.values() if self.passed else [self.last]


# Call views shared through Django's cache: bump the version when `CallPack` changes shape.
CALL_PACK_VERSION = 9  # 9: long runs of rows changed alike fold (Fold.status)
CALL_PACK_SECONDS = 24 * 3600


class ReplayCache:
    """Everything a web process keeps between requests (see the module docstring)."""

    def __init__(self, session_bytes: int) -> None:
        self.session_bytes = session_bytes
        self._fresh()

    def _fresh(self) -> None:
        # One budget (CTXSIM_SESSION_CACHE_MB) for everything below, by estimated bytes: past
        # it the least recently used entry of any kind goes. A viewer trying 30 thresholds
        # once held 30 replays of 10 MB each, as the maps were bounded by count (issue 20
        # item 1).
        self.pool = Pool(self.session_bytes)
        # Loaded sessions (their contents' size): stepping through calls then costs the
        # replay alone, not a reload of every message.
        self.sessions: LRU[LoadedSession] = LRU(size=lambda e: e.size, pool=self.pool)
        # Stored summaries: every step of a call view needs its session's.
        self.runs: LRU[Any] = LRU(size=run_bytes, pool=self.pool)
        # Replays paused where the last request left them. A request takes its replay out
        # while it uses it, so two threads never advance the same generator.
        self.live: LRU[LiveReplay] = LRU(
            size=lambda e: replay_bytes(e.replay, *e.held()), pool=self.pool)
        # Calls a summary replay kept for the request that made it, by run (no call): the
        # calls by index, and the finished Replay.
        self.kept: LRU[tuple[dict[int, Any], Any]] = LRU(
            size=lambda e: replay_bytes(e[1], *e[0].values()), pool=self.pool)
        self._locks: dict[ReplayKey, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        # New replays each user is running now (ctxsim/replays/limits.py), by user id.
        self._running: dict[int, int] = {}

    def clear(self) -> None:
        """Forget everything this process keeps, as if it had just started (the call views
        in Django's cache are shared by all processes and stay)."""
        for lru in (self.sessions, self.runs, self.live, self.kept):
            lru.clear()

    def forget_replays(self) -> None:
        """Drop the paused and kept replays and the recent summaries, not the loaded sessions
        nor the token counts: as if another worker process served the next request."""
        for lru in (self.runs, self.live, self.kept):
            lru.clear()

    @contextmanager
    def another_process(self) -> Iterator[None]:
        """Within the block, this process starts empty (no sessions, replays, token counts
        or recall keys); what it kept comes back after the block. For tests of what processes
        share."""
        saved = dict(self.__dict__)
        self._fresh()
        try:
            with isolated_counters(), isolated_recall_keys():
                yield
        finally:
            self.__dict__.update(saved)

    @contextmanager
    def resized(self, limit: int) -> Iterator[None]:
        """Within the block, this process starts empty with a budget of `limit` bytes (for
        tests of the bound); what it kept comes back after the block."""
        saved = dict(self.__dict__)
        self.session_bytes = limit
        self._fresh()
        try:
            yield
        finally:
            self.__dict__.update(saved)

    def loaded_sessions(self) -> dict[int, set[str]]:
        """Session id → the counters primed with its stored counts."""
        return {key.session: set(entry.seen) for key, entry in self.sessions.items()}

    @contextmanager
    def replaying(self, key: ReplayKey) -> Iterator[None]:
        """One replay per settings at a time within the process: reviewers of one session
        often try the same value at once, and the others wait for the first one's result."""
        with self._locks_guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            yield
        with self._locks_guard:
            # A late waiter may still hold this lock object; at worst two replays run.
            if not lock.locked():
                self._locks.pop(key, None)

    @contextmanager
    def user_slot(self, user_id: int, limit: int) -> Iterator[bool]:
        """Count one more replay of this user's for the block; yields False (and counts
        nothing) when the user already runs `limit` of them."""
        with self._locks_guard:
            if self._running.get(user_id, 0) >= limit:
                taken = False
            else:
                self._running[user_id] = self._running.get(user_id, 0) + 1
                taken = True
        try:
            yield taken
        finally:
            if taken:
                with self._locks_guard:
                    self._running[user_id] -= 1
                    if not self._running[user_id]:
                        del self._running[user_id]

    def call_pack[P](self, key: ReplayKey, query: str, build: Callable[[], P]) -> P:
        """The call view of `key`'s call under `query`, from Django's cache when any process
        built it before, else built by `build` and shared."""
        name = self.call_pack_name(key, query)
        pack = django_cache.get(name)
        if pack is None:
            pack = build()
            django_cache.set(name, pack, timeout=CALL_PACK_SECONDS)
        return pack

    @staticmethod
    def call_pack_name(key: ReplayKey, query: str) -> str:
        """The Django cache name of `key`'s call view under `query` (with ":z" after it, the
        worker's bytes of that view, `ctxsim.replays.deep_calls`)."""
        return "ctxsim:call:" + hashlib.sha256(
            f"{CALL_PACK_VERSION}|{key.session}|{key.created.isoformat()}|{key.run}|{key.call}|"
            f"{query}".encode()
        ).hexdigest()


CANONICAL_CACHE_BYTES = django_settings.CTXSIM_SESSION_CACHE_MB * 1024 * 1024
REPLAYS = ReplayCache(CANONICAL_CACHE_BYTES)


def releases_memory[**P, R](task_body: Callable[P, R]) -> Callable[P, R]:
    """A task worker's task (background replay, insights column, overview figures): once it
    ends, what it replayed is let go — the paused and kept replays and summaries, which only a
    web process's next request could use — then the garbage is collected and the C allocator
    hands its free pages back (glibc `malloc_trim`), so an idle worker does not keep the peak
    of the longest session it replayed (issue 31). Loaded sessions and token counts stay,
    within their own bounds: the next task is often the same session's."""
    import functools

    @functools.wraps(task_body)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return task_body(*args, **kwargs)
        finally:
            REPLAYS.forget_replays()
            gc.collect()
            _trim_heap()

    return run


def _trim_heap() -> None:
    with suppress(OSError, AttributeError):  # not glibc: nothing to hand back explicitly
        ctypes.CDLL(None).malloc_trim(0)
