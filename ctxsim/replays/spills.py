"""Spilled files: the sink that stores a replay's spills, their compact record, reading them back.

A replay's spills are one packed record on its `ReplayRun` (`spill_files`): zlib-compressed
JSON listing each distinct content once (SHA-256, size) and each spill as (name, path, call,
content number). ChatCLI re-spills every oversized result at each later call under a new
number, so a 300-call session's replay makes about a thousand spills of a few hundred
contents: that was a thousand `SpilledFile` rows per new threshold (issue 20 item 1), and is
now one field of some 20 KB. A spill is addressed by its run's key and its position (`seq`),
which stay the same when an evicted run is replayed again. `SpillContent` rows (one per
distinct content per session) say which stored files a session still points to.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.http import Http404

from ctxsim.pipeline.messages import decode_for_display
from ctxsim.pipeline.params import ascii_index
from ctxsim.pipeline.spill import SpillRecord, SpillSink
from ctxsim.replays.db import insert_rows
from ctxsim.replays.models import ReplayRun, SpillContent, storage_name_for


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

    def forget_contents(self) -> None:
        """Let go of the bytes this sink hashed (their digests stay valid in the records)."""
        self._digests.clear()


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


@dataclass(frozen=True)
class SpillRef:
    """One spill of a stored replay, as the call view links it and the spill viewer shows it."""

    run_key: str
    seq: int
    name: str
    path: str
    created_in_call: int
    size: int
    sha256: str

    @property
    def storage_name(self) -> str:
        return storage_name_for(self.sha256)

    @property
    def ref(self) -> str:
        """The spill's part of its URL: `<run key>/<seq>`."""
        return f"{self.run_key}/{self.seq}"


PACK_VERSION = 1


def pack_spills(records: Iterable[SpillRecord],
                sha256: Callable[[bytes], str]) -> tuple[bytes, dict[str, int]]:
    """A replay's spills as one compact record, and its distinct contents (SHA-256 → size)."""
    numbers: dict[str, int] = {}
    contents: dict[str, int] = {}
    files = []
    for record in records:
        digest = sha256(record.content)
        number = numbers.get(digest)
        if number is None:
            number = numbers[digest] = len(numbers)
            contents[digest] = record.size
        files.append([record.name, record.path, record.created_in_call, number])
    if not files:
        return b"", contents
    body = {"v": PACK_VERSION, "contents": [[d, n] for d, n in contents.items()], "files": files}
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 6), contents


def _unpacked(data: bytes | memoryview) -> dict[str, Any]:
    return json.loads(zlib.decompress(bytes(data)).decode("utf-8", "surrogatepass"))


class _Packed:
    """A run's packed spills, decoded once: each `SpillRef` is made when asked for. A call view
    shows the few spills of its call; making a ref for each of the run's thousand re-spills
    was 4 % of a new threshold's request (issue 31)."""

    def __init__(self, body: dict[str, Any], run_key: str) -> None:
        self.run_key = run_key
        self.contents = body["contents"]
        self.files = body["files"]
        self._by_call: dict[int, list[int]] | None = None

    def ref(self, seq: int) -> SpillRef:
        name, path, call, n = self.files[seq]
        sha256, size = self.contents[n]
        return SpillRef(self.run_key, seq, name, path, call, size, sha256)

    def in_call(self, index: int) -> list[SpillRef]:
        by_call = self._by_call
        if by_call is None:  # built whole, then shared (threads may both build it)
            by_call = {}
            for seq, entry in enumerate(self.files):
                by_call.setdefault(entry[2], []).append(seq)
            self._by_call = by_call
        return [self.ref(seq) for seq in by_call.get(index, ())]


_NOTHING_PACKED = _Packed({"contents": [], "files": []}, "")


def _packed(run: ReplayRun) -> _Packed:
    """The run's spills, decoded once per run object."""
    packed = run.__dict__.get("_spills_packed")
    if packed is None:
        packed = (_Packed(_unpacked(run.spill_files), run.key) if run.spill_files
                  else _NOTHING_PACKED)
        run.__dict__["_spills_packed"] = packed
    return packed


def spills_of(run: ReplayRun) -> list[SpillRef]:
    """The run's spills in creation order."""
    packed = _packed(run)
    return [packed.ref(seq) for seq in range(len(packed.files))]


def spills_in_call(run: ReplayRun, index: int) -> dict[str, SpillRef]:
    """The spills call `index` wrote, by file name."""
    return {s.name: s for s in _packed(run).in_call(index)}


def spill_at(run: ReplayRun, seq: int) -> SpillRef:
    packed = _packed(run)
    if not 0 <= seq < len(packed.files):
        raise Http404("No such spilled file.")
    return packed.ref(seq)


def drop_contents(replay: Any, calls: Iterable[Any],
                  sink: StorageSpillSink | None = None) -> None:
    """Once a replay's spills are stored (or not needed: the call view's replays), its records
    keep their names but not their bytes: a kept replay held every re-spill's bytes, some
    15 MB for a 300-call session. The replay may go on (only the records' number matters)."""
    light: dict[int, SpillRecord] = {}
    records = replay.spills.records
    # Every heavy record stays alive until the calls point to the light ones: a freed record's
    # id goes to the next object made, and a call held twice (the landing call is also in the
    # window around the peak) then named another call's spill.
    heavy = list(records)
    for n, record in enumerate(heavy):
        if record.content:
            records[n] = light[id(record)] = replace(record, content=b"")
    if light:
        for call in calls:
            call.spills = [light.get(id(r), r) for r in call.spills]
    if sink is not None:
        sink.forget_contents()


def record_contents(session: Any, contents: dict[str, int]) -> None:
    """Note that `session`'s replays point to these contents (one row per distinct one)."""
    # One executemany of plain tuples: a replay at a new threshold names hundreds of contents,
    # most recorded already by the session's other replays (26 ms a replay as model objects).
    insert_rows(SpillContent, ("session", "sha256", "size"),
                [(session.pk, d, n) for d, n in contents.items()], ignore_conflicts=True)


def forget_unreferenced(session: Any) -> None:
    """Drop `session`'s content rows that none of its remaining runs points to, and, once
    committed, the stored files no session points to any more."""
    used: set[str] = set()
    # The packed record lists each content once: no need to unpack every spill (a thousand
    # per run, 16 runs, at every threshold past CTXSIM_RUNS_PER_SESSION: 12 % of such a
    # replay's request).
    for data in ReplayRun.objects.filter(session=session).values_list("spill_files", flat=True):
        if data:
            used.update(digest for digest, _size in _unpacked(data)["contents"])
    gone = set(SpillContent.objects.filter(session=session)
               .values_list("sha256", flat=True)) - used
    if not gone:
        return
    SpillContent.objects.filter(session=session, sha256__in=gone).delete()
    remove_orphans_on_commit(gone)


def remove_orphans_on_commit(hashes: set[str]) -> None:
    """After commit (storage is not transactional), delete the stored files of `hashes` that
    no session's content rows name any more."""
    def remove() -> None:
        still_used = set(SpillContent.objects.filter(sha256__in=hashes)
                         .values_list("sha256", flat=True))
        for digest in hashes - still_used:
            default_storage.delete(storage_name_for(digest))

    transaction.on_commit(remove)


def spill_bytes(spill: SpillRef) -> bytes:
    """The spilled file's bytes; Http404 when storage lost them (e.g. a bucket was cleaned)."""
    try:
        with default_storage.open(spill.storage_name, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise Http404("This spilled file is no longer in storage.") from None


# Lines the spill viewer shows at once: an 8 MB log rendered whole made 14 MB of HTML.
SPILL_PAGE_LINES = 500


def spill_lines(data: bytes, start: str | None, end: str | None) -> dict[str, Any]:
    """Numbered lines of a spilled file, limited to [start, end] (1-based, inclusive) when
    given, else the first SPILL_PAGE_LINES; a range longer than that is cut to it (the page
    links to the next one). Bad bounds are reported, not fatal."""
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
    last = bound(end, min(total, first + SPILL_PAGE_LINES - 1), "end")
    if first > last:
        problems.append("start is after end")
        first, last = 1, min(total, SPILL_PAGE_LINES)
    if last - first + 1 > SPILL_PAGE_LINES:
        last = first + SPILL_PAGE_LINES - 1
    previous = (max(1, first - SPILL_PAGE_LINES), first - 1) if first > 1 else None
    following = (last + 1, min(total, last + SPILL_PAGE_LINES)) if last < total else None
    return {
        "lines": list(enumerate(lines[first - 1 : last], start=first)),
        "total_lines": total,
        "first": first,
        "last": last,
        "ranged": (first, last) != (1, total),
        "previous_range": previous,
        "next_range": following,
        "page_lines": SPILL_PAGE_LINES,
        "problems": problems,
        "size": len(data),
    }
