"""Reading a `.zip` or `.tar.gz` upload: the multi-file transcripts (Claude Code request
bodies, Cline / Roo Code task folders, OpenHands V1 conversation directories, OpenCode's
storage tree, a `codex exec --json` stream with its rollout) come as one archive of a folder,
or as loose files the upload page packs into one (`ctxsim/transcripts/bundles.py`).

Members are read lazily and within the upload's byte budget (a zip bomb may declare less than
it holds); hidden files and `__MACOSX` are ignored.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import tarfile
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .errors import TranscriptError
from .source import MAX_DEPTH, Probe, Source, check_depth

MAX_MEMBERS = 100_000


class Archive:
    """The regular files of a zip or tar.gz, by path, read lazily and within a byte budget."""

    def __init__(self, source: Source):
        self.source = source
        self.budget = source.max_bytes
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        self._stream_cm = source.open()
        stream = self._stream_cm.__enter__()
        if source.archive not in ("zip", "gzip"):
            self.close()
            raise TranscriptError("not a .zip or .tar.gz archive")
        try:
            if source.archive == "zip":
                self._zip = zipfile.ZipFile(stream)
                names = [i.filename for i in self._zip.infolist() if not i.is_dir()]
            else:
                self._tar = tarfile.open(fileobj=stream, mode="r:gz")  # noqa: SIM115 (closed in close())
                names = [m.name for m in self._tar.getmembers() if m.isfile()]
        except (zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:
            self.close()
            raise TranscriptError(f"the archive cannot be read ({error})") from None
        if len(names) > MAX_MEMBERS:
            self.close()
            raise TranscriptError(f"the archive holds more than {MAX_MEMBERS} files")
        self.names = [n for n in names if not _hidden(n)]

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, name: str) -> bytes:
        try:
            if self._zip is not None:
                info = self._zip.getinfo(name)
                self._spend(info.file_size, name)
                with self._zip.open(info) as stream:
                    data = stream.read(self.budget + 1)
            else:
                assert self._tar is not None
                member = self._tar.getmember(name)
                self._spend(member.size, name)
                handle = self._tar.extractfile(member)
                data = handle.read(self.budget + 1) if handle is not None else b""
        except (KeyError, zipfile.BadZipFile, tarfile.TarError, OSError, EOFError) as error:
            raise TranscriptError(f"{name}: cannot be read from the archive ({error})") from None
        self._spend(len(data), name, actual=True)
        return data

    def head(self, name: str, size: int = 4096) -> bytes:
        """The first bytes of a member (for detection), without spending the budget."""
        try:
            if self._zip is not None:
                with self._zip.open(name) as stream:
                    return stream.read(size)
            assert self._tar is not None
            handle = self._tar.extractfile(self._tar.getmember(name))
            return handle.read(size) if handle is not None else b""
        except (KeyError, zipfile.BadZipFile, tarfile.TarError, OSError, EOFError):
            return b""

    def _spend(self, size: int, name: str, *, actual: bool = False) -> None:
        # Declared sizes are checked first (cheap), then what really came out.
        if size > self.budget:
            raise TranscriptError(
                f"{name}: the archive's contents are larger than the upload limit"
            )
        if actual:
            self.budget -= size

    def mtime(self, name: str) -> float:
        """When the member was written (seconds; zip keeps two-second steps)."""
        try:
            if self._zip is not None:
                stamp = self._zip.getinfo(name).date_time
                return datetime(*stamp, tzinfo=UTC).timestamp()
            assert self._tar is not None
            return float(self._tar.getmember(name).mtime)
        except (KeyError, ValueError, OverflowError):
            return 0.0

    def close(self) -> None:
        for handle in (self._zip, self._tar):
            if handle is not None:
                handle.close()
        self._stream_cm.__exit__(None, None, None)


def archive_verdict(probe: Probe, holds: Callable[[Archive], Any], missing: str) -> bool | str:
    """An archive format's detection of an uploaded archive: True when `holds(archive)` finds
    what the format reads, else why not (`missing`, an SQLite database, an unreadable
    archive)."""
    if probe.source.archive == "sqlite":
        return "an SQLite database"
    try:
        with Archive(probe.source) as archive:
            return True if holds(archive) else missing
    except TranscriptError as error:
        return str(error)


def _hidden(name: str) -> bool:
    parts = name.split("/")
    return any(p.startswith(".") or p == "__MACOSX" for p in parts if p)


def basename(name: str) -> str:
    return posixpath.basename(name)


def folder(name: str) -> str:
    return posixpath.dirname(name)


def json_member(archive: Archive, name: str) -> Any:
    """A member parsed as one JSON document; errors name the member."""
    return parse_json(archive.read(name), name)


def parse_json(raw: bytes, name: str) -> Any:
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    check_depth(raw)
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TranscriptError(f"{name}: not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise TranscriptError(
            f"{name}: malformed JSON ({error.msg}, line {error.lineno} column {error.colno})"
        ) from None
    except RecursionError:
        raise TranscriptError(f"{name}: nested deeper than {MAX_DEPTH} levels") from None


def jsonl_member(archive: Archive, name: str) -> list[tuple[int, Any]]:
    """A JSON Lines member as (line, value); a cut-off last line is dropped, any other bad line
    is an error naming the member and line."""
    text = archive.read(name).decode("utf-8", "replace")
    lines = [(n, raw) for n, raw in enumerate(text.splitlines(), start=1) if raw.strip()]
    out: list[tuple[int, Any]] = []
    for position, (line_no, raw) in enumerate(lines):
        try:
            out.append((line_no, json.loads(raw)))
        except ValueError as error:
            if position == len(lines) - 1:
                break
            raise TranscriptError(f"{name}: malformed JSON ({error})", line=line_no) from None
    return out


def folder_bytes(root: str, max_bytes: int) -> bytes:
    """A zip of a directory's regular files (hidden ones left out), refused past `max_bytes`
    before anything is read."""
    files: list[tuple[str, str]] = []
    total = 0
    for folder_path, folders, names in os.walk(root):
        folders[:] = sorted(d for d in folders if not d.startswith("."))
        for name in sorted(names):
            if name.startswith("."):
                continue
            path = os.path.join(folder_path, name)
            if not os.path.isfile(path) or os.path.islink(path):
                continue
            total += os.path.getsize(path)
            if total > max_bytes or len(files) >= MAX_MEMBERS:
                raise TranscriptError("the folder's files are larger than the upload limit "
                                      "(or too many)")
            files.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    if not files:
        raise TranscriptError("the folder holds no file")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as packed:
        for name, path in files:
            packed.write(path, name)
    return buffer.getvalue()


def archive_bytes(files: dict[str, bytes]) -> bytes:
    """A zip of the given files (name → bytes): for tests and for uploads of loose files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()
