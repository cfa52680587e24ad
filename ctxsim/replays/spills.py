"""Spilled files: the sink that stores a replay's spills, and reading them back for display."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.http import Http404

from ctxsim.pipeline.messages import decode_for_display
from ctxsim.pipeline.params import ascii_index
from ctxsim.pipeline.spill import SpillSink
from ctxsim.replays.models import SpilledFile, storage_name_for


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
        # A file of the right size, not just the name: a full disk or a killed process once
        # left a 0-byte file that every later replay trusted (issue 20 item 13).
        if _stored_size(target) != len(data):
            _write_whole(target, data)
        self._stored.add(target)


def _stored_size(name: str) -> int | None:
    try:
        return default_storage.size(name)
    except (FileNotFoundError, OSError):
        return None


def _write_whole(name: str, data: bytes) -> None:
    """Store `data` under exactly `name`, complete or not at all."""
    try:
        local = default_storage.path(name)
    except NotImplementedError:
        local = None
    if local is None:
        # Remote storage (S3) writes an object whole or not at all; the name must be freed
        # first, as save() would otherwise pick another one.
        if default_storage.exists(name):
            default_storage.delete(name)
        default_storage.save(name, ContentFile(data))
        return
    # Local disk: a temporary file in the same folder, renamed over the name once complete,
    # removed when anything fails (ENOSPC half-way leaves nothing behind).
    folder = os.path.dirname(local)
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=".partial-", dir=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        fd = -1
        mode = getattr(settings, "FILE_UPLOAD_PERMISSIONS", None)
        os.chmod(temporary, mode if mode is not None else 0o644)
        os.replace(temporary, local)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


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
    lines = decode_for_display(data).split("\n")
    total = len(lines)
    problems = []

    def bound(text: str | None, default: int, name: str) -> int:
        if text in (None, ""):
            return default
        number = ascii_index(text.strip())
        if number is None or number < 1:
            problems.append(f"{name} must be a line number from 1 to {total}")
            return default
        return min(number, total)

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
