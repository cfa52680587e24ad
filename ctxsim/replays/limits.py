"""How many new replays one user may run at a time (issue 20 items 1 and 4).

A new threshold means a new replay: seconds of CPU for a long session, on one of the few
request threads. Four GETs of one viewer occupied every thread of a worker and other teams'
pages waited half a minute. A user now runs at most `CTXSIM_REPLAYS_PER_USER` new replays at
once; one more is answered 429 with a message to retry (stored replays are served as ever,
and other users are not affected). Sessions longer than CTXSIM_INLINE_REPLAY_CALLS are not
replayed by requests at all (`ctxsim.replays.background`).

The count is kept twice: exactly within the process (`ReplayCache.user_slot`), and across
processes in Django's cache (`ctxsim:replaying:<user id>`, incremented and decremented
around the replay), so a user's requests spread over several gunicorn workers share one
limit. With Redis (production) the count is atomic; with the file cache two processes
counting at the same instant may both pass (the cache's increment is a read and a write);
with the local-memory cache (development, tests) it is per process, as the exact count. An
entry expires SHARED_SLOT_SECONDS after its first use, so the slots of a process killed
mid-replay are given back then. `ReplayBusy` is a refusal of the one admission policy
(`ctxsim.jobs.policy.QueueFull`), answered as every other (a 429 with its Retry-After).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.cache import cache as django_cache

from ctxsim.jobs.policy import QueueFull
from ctxsim.replays.cache import REPLAYS

RETRY_AFTER_SECONDS = 5
# A replay a request may run is bounded by CTXSIM_INLINE_REPLAY_CALLS (seconds); a count left
# by a killed process is forgotten after this.
SHARED_SLOT_SECONDS = 300


class ReplayBusy(QueueFull):
    """The user already runs as many new replays as they may: one of the refusals of the one
    admission policy (`ctxsim.jobs.policy`), answered by its middleware (429, Retry-After)."""

    def __init__(self) -> None:
        super().__init__("Another replay of yours is already running; this one starts when it "
                         "is done. Retry in a few seconds.", RETRY_AFTER_SECONDS)


@contextmanager
def replay_slot(user: Any) -> Iterator[None]:
    """Hold one of `user`'s replay slots for the block, or raise ReplayBusy. Anonymous or no
    user (commands, the worker): no limit."""
    uid = getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None
    if uid is None:
        yield
        return
    limit = settings.CTXSIM_REPLAYS_PER_USER
    with REPLAYS.user_slot(uid, limit) as taken:
        if not taken:
            raise ReplayBusy
        with _shared_slot(uid, limit):
            yield


def shared_slot_name(user_id: int) -> str:
    return f"ctxsim:replaying:{user_id}"


@contextmanager
def _shared_slot(user_id: int, limit: int) -> Iterator[None]:
    """One of the user's slots in Django's cache, shared by every process that uses it."""
    name = shared_slot_name(user_id)
    django_cache.add(name, 0, timeout=SHARED_SLOT_SECONDS)
    try:
        running = django_cache.incr(name)
    except ValueError:  # expired between the two calls
        django_cache.add(name, 1, timeout=SHARED_SLOT_SECONDS)
        running = 1
    if running > limit:
        _release(name)
        raise ReplayBusy
    try:
        yield
    finally:
        _release(name)


def _release(name: str) -> None:
    with contextlib.suppress(ValueError):  # expired meanwhile: nothing to give back
        django_cache.decr(name)
