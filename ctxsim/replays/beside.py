"""What other apps keep for a session's replay, shown on the session page beside it: a port
(issue 30). The session page reads what is stored for its settings without importing the app
that stores it (the dependency runs one way: `analysis` uses `replays`, never the reverse);
an app registers its reader when Django starts (`AppConfig.ready`).

Registered today: `insights`, the cache & information-loss headline that
`ctxsim.analysis.results.stored_headline` reads from the one store of per-session results
(`SessionResult`) — shown on the page's link to that page, and only once stored: reading it
never replays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# (session, replay settings) -> what is stored for them, or None.
Reader = Callable[[Any, Any], dict[str, Any] | None]
_READERS: dict[str, Reader] = {}


def register(name: str, reader: Reader) -> None:
    _READERS[name] = reader


def stored(name: str, session: Any, settings: Any) -> dict[str, Any] | None:
    """What `name`'s reader has stored for the session under these settings (None when
    nothing is, or no app registered that reader)."""
    reader = _READERS.get(name)
    return reader(session, settings) if reader is not None else None
