"""One upload: `POST /api/v1/transcripts` with a total deadline, the token never sent to
another origin (a redirect elsewhere is refused, not followed)."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.parse
from pathlib import Path

from ctxsim_push.files import PushError, prepare

USER_AGENT = "ctxsim-push/2"
MAX_REDIRECTS = 3


def config() -> tuple[str, str, float]:
    url = os.environ.get("CTXSIM_URL", "").strip().rstrip("/")
    token = os.environ.get("CTXSIM_TOKEN", "").strip()
    if not url:
        raise PushError("CTXSIM_URL is not set (e.g. CTXSIM_URL=http://127.0.0.1:8000)")
    if not url.startswith(("http://", "https://")):
        raise PushError(f"CTXSIM_URL={url!r} is not an http(s) URL")
    if not token:
        raise PushError("CTXSIM_TOKEN is not set (create a token on ctxsim's team page)")
    try:
        timeout = float(os.environ.get("CTXSIM_TIMEOUT", "60"))
    except ValueError:
        raise PushError("CTXSIM_TIMEOUT is not a number of seconds") from None
    return url, token, timeout


def _origin_of(url: str) -> tuple[str, str, int]:
    parts = urllib.parse.urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, (parts.hostname or "").lower(), parts.port or default


def _post(url: str, token: str, body, length: int, deadline: float) -> tuple[int, bytes, str]:
    """One POST with a watchdog that closes the socket at the deadline (a silent or trickling
    server cannot hold it longer). Returns (status, body, Location)."""
    scheme, host, port = _origin_of(url)
    parts = urllib.parse.urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise PushError(f"cannot reach {host}: out of time")
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    connection = kind(host, port, timeout=min(remaining, 30.0))
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        with contextlib.suppress(OSError, AttributeError):
            connection.sock.shutdown(socket.SHUT_RDWR)

    watchdog = threading.Timer(remaining, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.putrequest("POST", path, skip_accept_encoding=True)
        for name, value in (("Authorization", f"Bearer {token}"),
                            ("Content-Type", "application/octet-stream"),
                            ("Content-Encoding", "gzip"), ("Content-Length", str(length)),
                            ("User-Agent", USER_AGENT)):
            connection.putheader(name, value)
        connection.endheaders()
        body.seek(0)
        while chunk := body.read(64 * 1024):
            connection.send(chunk)
        response = connection.getresponse()
        data = b""
        while len(data) < 1024 * 1024 and (piece := response.read(16 * 1024)):
            data += piece
        return response.status, data, response.getheader("Location") or ""
    except (OSError, http.client.HTTPException) as error:
        if expired.is_set():
            raise PushError(f"cannot reach {host}: no answer within the deadline") from None
        raise PushError(f"cannot reach {host} ({error})") from None
    finally:
        watchdog.cancel()
        connection.close()


def push(path: Path, *, archives: bool = False, folders: list[Path] | None = None,
         **fields) -> dict:
    """POST one file (gzip-compressed on the way); returns the server's JSON answer."""
    config()  # a missing variable is said before the file is read
    return send(path, prepare(path, archives=archives, folders=folders), **fields)


def send(path: Path, prepared, *, format: str = "", name: str = "", session_key: str = "",
         origin: dict | None = None) -> dict:
    """POST a prepared file (`prepare`) with a total deadline; the server's JSON answer."""
    url, token, timeout = config()
    deadline = time.monotonic() + timeout
    packed, length, sha256, _ = prepared
    query = {k: v for k, v in (("format", format), ("name", name or path.name),
                               ("session_key", session_key), *(origin or {}).items()) if v}
    target = f"{url}/api/v1/transcripts?{urllib.parse.urlencode(query)}"
    with packed:
        for _ in range(MAX_REDIRECTS + 1):
            status, data, location = _post(target, token, packed, length, deadline)
            if status not in (301, 302, 303, 307, 308):
                break
            moved = urllib.parse.urljoin(target, location)
            if _origin_of(moved) != _origin_of(target):
                raise PushError(f"{path}: the server redirects to another origin ({moved}); "
                                "the token is not sent there (fix CTXSIM_URL)")
            target = moved
        else:
            raise PushError(f"{path}: too many redirects")
    if status >= 400:
        message = _message(data) or f"HTTP {status}"
        permanent = status in (400, 413, 415, 422)
        raise PushError(f"{path}: {status} {message}", permanent=permanent)
    try:
        answer = json.loads(data or b"{}")
    except ValueError:
        raise PushError(f"{path}: the server's answer is not JSON") from None
    answer["status"] = status
    answer["sha256"] = sha256
    return answer


def _message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("detail") or "")
    except (ValueError, AttributeError):
        return data[:200].decode("utf-8", "replace")


def describe(path: Path, answer: dict) -> str:
    status = answer.get("status")
    if status == 202:
        return f"{path}: queued for import ({answer['job']['url']})"
    sessions = answer.get("sessions") or []
    verb = "already imported" if status == 200 else "imported"
    links = " ".join(s.get("url", "") for s in sessions)
    return f"{path}: {verb}, {len(sessions)} session(s) {links}".rstrip()
