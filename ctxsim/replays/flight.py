"""One new replay of the same settings at a time on this machine, whichever process asks.

`REPLAYS.replaying` makes a process's threads wait for the first one's replay of the same
settings. gunicorn's workers are processes, though, and reviewers of one session trying the
same threshold through different workers each replayed it: about one first-time replay in
eight under `make loadtest --users 100`, each 0.3–0.6 s of a core at 200 calls, spent when
the cores were busiest. A new replay of a (session, run key) now also holds an exclusive
`flock` on a lock file chosen by that key under CTXSIM_LOCK_DIR; a process that finds it held
waits for it (polling, at most WAIT_SECONDS) and then reads the run the other one stored, as
a waiting thread does.

- The kernel lets go of a dead process's lock: a killed worker never leaves one behind.
- Keys share BUCKETS files (no file per key is created, none is ever removed): two given keys
  fall in one bucket once in BUCKETS, and their replays then run one after the other.
- Past WAIT_SECONDS (a replay stuck elsewhere) the waiter replays anyway, as before.
- A lock directory that cannot be made (a read-only disk) turns the lock off, logged once:
  replays run as before, never fail for it.
- Processes on other machines share nothing here: each machine replays at most once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

BUCKETS = 1024
WAIT_SECONDS = 60.0
POLL_SECONDS = 0.02
_warned: set[str] = set()


def lock_file(session_id: int, run_key: str) -> Path:
    """The lock file of a session's run key (one of BUCKETS)."""
    digest = hashlib.sha256(f"{session_id}|{run_key}".encode()).digest()
    bucket = int.from_bytes(digest[:4], "big") % BUCKETS
    return Path(settings.CTXSIM_LOCK_DIR) / f"replay-{bucket:04d}.lock"


def _open(path: Path) -> int | None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        if str(path.parent) not in _warned:
            _warned.add(str(path.parent))
            logger.warning("replays of the same settings are not shared between processes: "
                           "cannot open a lock file in %s (%s)", path.parent, exc)
        return None


@contextmanager
def one_at_a_time(session_id: int, run_key: str) -> Iterator[None]:
    """Hold the machine-wide lock of this session's run key for the block, waiting while
    another process holds it (which may have stored the run meanwhile: the block reads it
    again before replaying)."""
    fd = _open(lock_file(session_id, run_key))
    if fd is None:
        yield
        return
    try:
        locked = False
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    logger.warning("replay lock of session %s held for over %.0f s elsewhere; "
                                   "replaying here too", session_id, WAIT_SECONDS)
                    break
                time.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            if locked:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
