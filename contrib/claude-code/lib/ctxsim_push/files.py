"""What `ctxsim-push` may send, and the file as it is sent (issue 28 item 5).

Regular files only (never a FIFO, device or socket: opened without blocking, then checked), a
symlink only when it points inside the agent's folders, never a key file (by name, by folder,
or a private key's first line), only JSON or JSON Lines (and, given by hand, a .zip or
.tar.gz); a JSON Lines file whose last line is not finished is `Incomplete` (tried later).
`prepare` reads it in chunks into a temporary gzip file, so memory stays bounded.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

CHUNK = 1024 * 1024
# The first bytes of a subagent file name its parent session; enough for its first record.
HEAD_BYTES = 64 * 1024
KEY_NAMES = {"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk",
             "authorized_keys", "known_hosts", ".netrc", ".pgpass", "credentials", ".env"}
KEY_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".crt", ".der", ".gpg", ".asc", ".kdbx")
SECRET_FOLDERS = (".ssh", ".gnupg", ".aws", ".kube", ".docker")
ARCHIVE_MAGIC = (b"PK\x03\x04", b"\x1f\x8b")


class PushError(Exception):
    """An upload that did not happen; `permanent` when the server refused it for good."""

    def __init__(self, message: str, *, permanent: bool = False, retry: bool = True):
        super().__init__(message)
        self.permanent = permanent
        self.retry = retry and not permanent


class Incomplete(PushError):
    """The file is still being written: try again later."""


def agent_folders() -> list[Path]:
    """The agents' own folders: a symlink is followed only into one of these."""
    home = Path.home()
    found = [Path(os.environ.get("CLAUDE_CONFIG_DIR") or home / ".claude"),
             Path(os.environ.get("CODEX_HOME") or home / ".codex")]
    return [p.expanduser().resolve() for p in found]


def _inside(path: Path, folders: list[Path]) -> bool:
    return any(path == f or f in path.parents for f in folders)


def check_file(path: Path, *, folders: list[Path] | None = None) -> None:
    """Refuse what is not a regular transcript file (raises PushError, permanent)."""
    folders = agent_folders() + list(folders or [])
    name = path.name.lower()
    resolved = path.resolve()
    home = Path.home().resolve()
    secret = [home / f for f in SECRET_FOLDERS]
    ssh_like = name.startswith("id_") and not name.endswith((".json", ".jsonl"))
    if name in KEY_NAMES or name.endswith(KEY_SUFFIXES) or ssh_like or _inside(resolved, secret):
        raise PushError(f"{path}: looks like a key or credentials file; not sent",
                        permanent=True)
    try:
        info = path.lstat()
    except OSError as error:
        raise PushError(f"{path}: cannot read it ({error.strerror or error})",
                        permanent=True) from None
    if stat.S_ISLNK(info.st_mode) and not _inside(resolved, folders):
        raise PushError(f"{path}: a symlink out of the agent's folders ({resolved}); not sent",
                        permanent=True)
    if resolved.name.lower() in KEY_NAMES or resolved.name.lower().endswith(KEY_SUFFIXES):
        raise PushError(f"{path}: points at a key or credentials file; not sent",
                        permanent=True)


def open_regular(path: Path):
    """Open without blocking (a FIFO would wait for a writer) and check it is a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as error:
        raise PushError(f"{path}: cannot read it ({error.strerror or error})",
                        permanent=True) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise PushError(f"{path}: not a regular file (a FIFO, device or socket); not sent",
                        permanent=True)
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), info


def _sniff(path: Path, head: bytes, archives: bool) -> None:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if archives and head.startswith(ARCHIVE_MAGIC):
        return
    if text.startswith(b"-----BEGIN"):
        raise PushError(f"{path}: holds a private key; not sent", permanent=True)
    if not text.startswith((b"{", b"[")):
        raise PushError(f"{path}: not JSON or JSON Lines; not sent", permanent=True)


def _complete(path: Path, handle, size: int, head: bytes) -> None:
    """A JSON Lines file is complete when its last line ends and parses; a JSON document
    when it ends with its closing bracket. Raises Incomplete otherwise."""
    if head.startswith(ARCHIVE_MAGIC) or size == 0:
        return
    start = max(0, size - HEAD_BYTES)
    handle.seek(start)
    tail = handle.read(size - start)
    handle.seek(0)
    stripped = tail.rstrip(b" \t\r\n")
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first == b"[" or (first == b"{" and b"\n" not in head.strip()):
        if not stripped.endswith((b"}", b"]")):
            raise Incomplete(f"{path}: still being written (the JSON is not closed)")
        return
    if not tail.endswith(b"\n"):
        raise Incomplete(f"{path}: still being written (its last line is not finished)")
    last = stripped.rsplit(b"\n", 1)[-1]
    if len(last) < len(stripped) or start == 0:
        try:
            json.loads(last)
        except ValueError:
            raise Incomplete(f"{path}: still being written (its last line is cut)") from None


def prepare(path: Path, *, archives: bool = False, folders: list[Path] | None = None):
    """(temporary gzip file, its length, SHA-256 of the raw bytes, raw size) of a complete,
    sendable file; read in chunks, so memory stays bounded whatever its size."""
    check_file(path, folders=folders)
    handle, info = open_regular(path)
    with handle:
        size = info.st_size
        head = handle.read(HEAD_BYTES)
        handle.seek(0)
        if not head:
            raise PushError(f"{path}: the file is empty", permanent=True)
        _sniff(path, head, archives)
        _complete(path, handle, size, head)
        digest = hashlib.sha256()
        packed = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the caller)
        with gzip.GzipFile(fileobj=packed, mode="wb", compresslevel=6) as zipped:
            left = size  # what was there when it was found complete; later lines wait
            while left > 0 and (chunk := handle.read(min(CHUNK, left))):
                left -= len(chunk)
                digest.update(chunk)
                zipped.write(chunk)
    length = packed.tell()
    packed.seek(0)
    return packed, length, digest.hexdigest(), size
