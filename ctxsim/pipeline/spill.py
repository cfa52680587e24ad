"""Where budget spills go: an injected `SpillSink` (SPEC §2.1, behaviour file §3.5).

A sink receives (directory text, file name, bytes). Linux's limits are enforced the same way in
every sink, so a preview reads the same whether the bytes land in memory, on disk or in Django
storage: a name over 255 bytes fails to write, and a directory path through a non-directory
every Linux machine has (like `/dev/null/...`) fails to be created. Only the CLI's directory
sink also looks at this machine's disk.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

NAME_MAX = 255


class SpillError(OSError):
    """A spill that Linux would refuse; the budget stage falls back to a hard cut."""


# ChatCLI writes every result over its cap to a new file at every call (behaviour file §3.8,
# §4 note 10), so a cap below most results spills some n²/12 files over n calls: 21 million
# for 16,000 calls at 2,600 characters, which took a worker past its memory after minutes
# (each call's previews, ~3 KB each, stay measured by the replay). A replay stops past this
# many with `TooManySpills` (decision: a bound on the work, said as what to change, rather
# than a replay that runs for hours; 2,000 calls at that cap spill about 340,000, some 1.2 GB).
MAX_SPILLS = 500_000


class TooManySpills(ValueError):
    """The replay made MAX_SPILLS spill files: it stops, saying so."""

    def __init__(self, call_index: int) -> None:
        super().__init__(
            f"the replay stopped at call {call_index + 1}: its stages had written "
            f"{MAX_SPILLS:,} spill files by then (every result over a per-result cap, e.g. "
            f"CHATCLI_TOOL_RESULT_MAX_CHARS, is written again at every call). Raise the cap, or "
            f"replay a shorter session")


def clean_join(directory: str, name: str) -> str:
    """Go's `filepath.Join(dir, name)` on Linux: joined with `/`, then path-cleaned."""
    joined = f"{directory}/{name}" if directory else name
    if not joined:
        return ""
    cleaned = posixpath.normpath(joined)
    # normpath keeps a leading "//"; Go's Clean reduces it to "/".
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


# Non-directories on every Linux machine. A sink that must not look at the server's disk (the
# web app's: a viewer chooses `spill_dir`) decides from the text and this list alone, so its
# answer says nothing about which paths exist there (issue 20 item 19).
NEVER_DIRECTORIES = frozenset({
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
})


def dir_impossible_by_text(directory: str) -> bool:
    """True when `mkdir -p` fails on any Linux machine: an empty path, a NUL byte, or a path
    through one of NEVER_DIRECTORIES. Reads no filesystem."""
    if not directory or "\x00" in directory:
        return True
    parts = PurePosixPath(clean_join(directory, ""))
    return any(str(p) in NEVER_DIRECTORIES for p in [parts, *parts.parents])


def _dir_impossible(directory: str) -> bool:
    """True when Linux's `mkdir -p` would fail here: the text rule, or an existing prefix on
    this machine that is not a directory. Only for sinks that write this machine's disk."""
    if dir_impossible_by_text(directory):
        return True
    parts = Path(clean_join(directory, ""))
    return any(p.exists() and not p.is_dir() for p in [*parts.parents][::-1] + [parts])


class SpillSink:
    """Base sink: checks Linux's rules, then stores. Subclasses implement `_store`/`_mkdir`."""

    def ensure_dir(self, directory: str) -> None:
        """Create the directory (with parents) or raise SpillError; decided from the text."""
        if dir_impossible_by_text(directory):
            raise SpillError(f"cannot create directory {directory!r}")
        self._mkdir(directory)

    def write(self, directory: str, name: str, data: bytes) -> None:
        """Store one file or raise SpillError (e.g. ENAMETOOLONG for names over 255 bytes)."""
        if len(name.encode("utf-8", "surrogatepass")) > NAME_MAX or "/" in name or (
            "\x00" in name
        ):
            raise SpillError(f"file name too long or invalid: {name!r}")
        self._store(directory, name, data)

    def _mkdir(self, directory: str) -> None:
        pass

    def _store(self, directory: str, name: str, data: bytes) -> None:
        raise NotImplementedError


@dataclass
class StoredSpill:
    directory: str
    name: str
    data: bytes


class MemorySpillSink(SpillSink):
    """Keeps spills in a list (tests, the web app before it saves them)."""

    def __init__(self) -> None:
        self.files: list[StoredSpill] = []

    def _store(self, directory: str, name: str, data: bytes) -> None:
        self.files.append(StoredSpill(directory, name, data))


class DirectorySpillSink(SpillSink):
    """Writes real files. `root` replaces the configured directory when given (previews keep
    the configured text); without it the configured directory itself is used."""

    def __init__(self, root: str | os.PathLike[str] | None = None):
        self.root = Path(root) if root is not None else None

    def _target(self, directory: str) -> Path:
        return self.root if self.root is not None else Path(directory)

    def ensure_dir(self, directory: str) -> None:
        if _dir_impossible(directory):
            raise SpillError(f"cannot create directory {directory!r}")
        try:
            self._target(directory).mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise SpillError(str(exc)) from exc

    def _store(self, directory: str, name: str, data: bytes) -> None:
        # A fresh private file (O_EXCL, no symlink followed), then renamed over the name: a
        # symlink or hard link planted at the name is replaced, never written through, and a
        # reader sees the whole file or none (issue 20 item 20).
        folder = self._target(directory)
        try:
            fd, temporary = tempfile.mkstemp(prefix=".spill-", dir=folder)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(temporary, folder / name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as exc:
            raise SpillError(str(exc)) from exc


class NullSpillSink(SpillSink):
    """Checks the rules but keeps nothing (summary replays that only need the previews)."""

    def _store(self, directory: str, name: str, data: bytes) -> None:
        pass


@dataclass(frozen=True)
class SpillRecord:
    """One file the budget wrote (trace `spilled_files[]`)."""

    name: str
    path: str
    created_in_call: int
    content: bytes

    @property
    def size(self) -> int:
        return len(self.content)


class SpillService:
    """The replay's spill state: ChatCLI's process-wide counter and the files created.

    One per replay, so the counter starts at 1 for each case, as in the reference traces.
    """

    def __init__(self, sink: SpillSink | None = None):
        self.sink = sink if sink is not None else MemorySpillSink()
        self.counter = 0
        self.records: list[SpillRecord] = []
        self._ready: set[str] = set()
        self._data: dict[int, tuple[str, bytes]] = {}  # `data_of`, by the content's identity

    def ensure_dir(self, directory: str) -> None:
        # Once a directory exists it stays: checking every path component again for each of
        # thousands of spills was a third of a long replay's budget stage.
        if directory not in self._ready:
            self.sink.ensure_dir(directory)
            self._ready.add(directory)

    def next_number(self) -> int:
        self.counter += 1
        return self.counter

    def data_of(self, content: str | bytes, encode: Callable[[str], bytes]) -> bytes:
        """The bytes a spill of `content` writes: one object per content object, so a result
        spilled again at every call holds its bytes once (and a sink hashes them once)."""
        if isinstance(content, bytes):
            return content
        hit = self._data.get(id(content))
        if hit is None or hit[0] is not content:
            hit = self._data[id(content)] = (content, encode(content))
        return hit[1]

    def write(self, directory: str, name: str, path: str, data: bytes, call_index: int) -> None:
        if len(self.records) >= MAX_SPILLS:
            raise TooManySpills(call_index)
        self.sink.write(directory, name, data)
        self.records.append(SpillRecord(name, path, call_index, data))
