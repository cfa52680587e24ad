"""How many new replays one user may run at a time in a web process (issue 20 items 1 and 4).

A new threshold means a new replay: seconds of CPU for a long session, on one of the few
request threads. Four GETs of one viewer occupied every thread of a worker and other teams'
pages waited half a minute. A user now runs at most `CTXSIM_REPLAYS_PER_USER` new replays at
once per process; one more is answered 429 with a message to retry (stored replays are served
as ever, and other users are not affected).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from ctxsim.replays.cache import REPLAYS

RETRY_AFTER_SECONDS = 5


class ReplayBusy(Exception):
    """The user already runs as many new replays as they may."""


@contextmanager
def replay_slot(user: Any) -> Iterator[None]:
    """Hold one of `user`'s replay slots for the block, or raise ReplayBusy. Anonymous or no
    user (commands, the worker): no limit."""
    uid = getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None
    if uid is None:
        yield
        return
    with REPLAYS.user_slot(uid, settings.CTXSIM_REPLAYS_PER_USER) as taken:
        if not taken:
            raise ReplayBusy
        yield


class ReplayBusyMiddleware:
    """Answers ReplayBusy from any view with a 429 and one sentence."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if not isinstance(exception, ReplayBusy):
            return None
        response = HttpResponse(
            "Another replay of yours is already running; this one starts when it is done. "
            "Retry in a few seconds.\n",
            status=429, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
