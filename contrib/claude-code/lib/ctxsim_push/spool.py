"""The spool: jobs a hook could not wait for, retried with backoff by a detached uploader
and every later run; what the server refuses for good goes to `failed/`; `SentIndex` is what
was sent (for `--backfill`). Folders are 0700, files 0600, and no token is ever written."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ctxsim_push.upload import PushError, describe, push

# Backoff between retries of one spooled job: 10 s, 20 s, 40 s, ... at most an hour.
BACKOFF_FIRST, BACKOFF_MAX = 10.0, 3600.0
# How long a detached uploader keeps retrying before it leaves the rest to a later run.
LINGER_SECONDS = 600.0


def spool_dir() -> Path:
    base = os.environ.get("CTXSIM_SPOOL")
    if base:
        folder = Path(base).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = Path(cache) / "ctxsim" / "spool"
    for part in (folder, folder / "jobs", folder / "failed"):
        part.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(part, 0o700)
    return folder


def _write_private(path: Path, data: dict) -> None:
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle)
    os.replace(temporary, path)


def spool(files: list[tuple[Path, str]], origin: dict) -> list[Path]:
    """One job file per transcript (the path, not a copy: it is read when sent). A job of the
    same file already waiting is replaced (the newer state of the file is what goes)."""
    jobs = spool_dir() / "jobs"
    made = []
    for path, key in files:
        name = hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:24] + ".json"
        job = {"path": str(path.absolute()), "session_key": key, "origin": origin,
               "attempts": 0, "next_at": 0, "created_at": time.time()}
        _write_private(jobs / name, job)
        made.append(jobs / name)
    return made


def _locked(job_path: Path):
    """An exclusive lock on one job (another uploader sending it is waited for)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one uploader at a time is the user's affair
        return contextlib.nullcontext(True)

    @contextlib.contextmanager
    def lock():
        with open(job_path.with_suffix(".lock"), "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield True
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    return lock()


def _unchanged(job_path: Path, job: dict) -> bool:
    """Whether the job file is still the one read (a hook may write a newer one meanwhile:
    it does not wait for the lock, so it never waits for a send)."""
    try:
        return json.loads(job_path.read_text()).get("created_at") == job.get("created_at")
    except (OSError, ValueError):
        return False


def flush(*, force: bool, out=sys.stderr) -> tuple[int, int]:
    """Send the spooled jobs that are due (all of them when `force`); (sent, left)."""
    folder = spool_dir()
    sent = left = 0
    for job_path in sorted((folder / "jobs").glob("*.json")):
        with _locked(job_path):
            try:
                job = json.loads(job_path.read_text())
            except (OSError, ValueError):
                continue  # sent (and removed) by another uploader meanwhile
            if not force and job.get("next_at", 0) > time.time():
                left += 1
                continue
            path = Path(job["path"])
            try:
                answer = push(path, session_key=job.get("session_key", ""),
                              origin=job.get("origin") or {})
            except PushError as error:
                if error.permanent:
                    failed = folder / "failed" / job_path.name
                    _write_private(failed, {**job, "error": str(error), "at": time.time()})
                    if _unchanged(job_path, job):
                        job_path.unlink(missing_ok=True)
                    print(f"ctxsim-push: {error} (kept in {failed})", file=out)
                    continue
                job["attempts"] = job.get("attempts", 0) + 1
                delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (job["attempts"] - 1))
                job["next_at"] = time.time() + delay
                job["last_error"] = str(error)
                if _unchanged(job_path, job):  # a newer job of the file is due at once
                    _write_private(job_path, job)
                left += 1
                print(f"ctxsim-push: {error} (spooled, next try in {delay:.0f} s)", file=out)
                continue
            if _unchanged(job_path, job):  # else a hook spooled the file again meanwhile
                job_path.unlink(missing_ok=True)
                job_path.with_suffix(".lock").unlink(missing_ok=True)
            SentIndex().add(path, answer.get("sha256", ""))
            sent += 1
            print(describe(path, answer), file=out)
    return sent, left


def detach_uploader(script: Path) -> None:
    """Start `--flush --detached` in its own session, output to the spool's log; return at once."""
    folder = spool_dir()
    log = os.open(folder / "uploader.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            [sys.executable, "-S", str(script), "--flush", "--detached"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
            start_new_session=True,
        )
    finally:
        os.close(log)
    (folder / "uploader.pid").write_text(str(process.pid))


def run_detached() -> None:
    """The detached uploader: send what is due, then wait for the next retry while it is near,
    for at most CTXSIM_LINGER_SECONDS (default 600) in all."""
    linger = float(os.environ.get("CTXSIM_LINGER_SECONDS", LINGER_SECONDS))
    until = time.monotonic() + linger
    while True:
        _, left = flush(force=False)
        jobs = list((spool_dir() / "jobs").glob("*.json"))
        if not left or not jobs:
            return
        due = []
        for job_path in jobs:
            with contextlib.suppress(OSError, ValueError):
                due.append(json.loads(job_path.read_text()).get("next_at", 0))
        wait = max(1.0, min(due, default=0) - time.time())
        if time.monotonic() + wait > until:
            return
        time.sleep(wait)


# -- what was sent -----------------------------------------------------------------------------


class SentIndex:
    """The local record of what was sent (path, SHA-256, size and mtime), so a backfill never
    sends a file twice; one JSON line per file sent, in the spool folder."""

    def __init__(self) -> None:
        self.path = spool_dir() / "sent.jsonl"
        self.entries: dict[str, dict] = {}
        with contextlib.suppress(OSError):
            for line in self.path.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError):
                    entry = json.loads(line)
                    self.entries[entry["path"]] = entry

    def unchanged(self, path: Path) -> bool:
        """Sent already with the same size and mtime (no need to read it again)."""
        entry = self.entries.get(str(path.absolute()))
        try:
            info = path.stat()
        except OSError:
            return False
        return bool(entry) and entry.get("size") == info.st_size and entry.get(
            "mtime_ns") == info.st_mtime_ns

    def has(self, path: Path, sha256: str) -> bool:
        entry = self.entries.get(str(path.absolute()))
        return bool(entry) and entry.get("sha256") == sha256

    def add(self, path: Path, sha256: str) -> None:
        try:
            info = path.stat()
        except OSError:
            return
        entry = {"path": str(path.absolute()), "sha256": sha256, "size": info.st_size,
                 "mtime_ns": info.st_mtime_ns}
        self.entries[entry["path"]] = entry
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as handle:
            handle.write(json.dumps(entry) + "\n")
