"""Reading a transcript file safely: size limit, byte-level checks, JSON and JSON Lines.

Every check of SPEC §7 that does not depend on the format lives here, so each importer only
maps records. Guarantees:

- JSON Lines are read one line at a time from a binary stream (a 100 MB file is never held
  whole); a whole JSON document is read at once, which the non-line formats need anyway.
- Every problem raises `TranscriptError` with the 1-based line (and column when it has one).
- Only the *last* line may be cut off mid-object: it is skipped with a warning. A bad line
  followed by more content is an error.
- Nesting deeper than `MAX_DEPTH` is refused before the parser sees it (Python's parser would
  otherwise recurse until it hits the interpreter's limit).
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from ctxsim.pipeline import jsontext

from .errors import TranscriptError

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
MAX_DEPTH = 200
HEAD_BYTES = 64 * 1024
PROBE_LINES = 50
PROBE_BYTES = 1024 * 1024

UTF8_BOM = b"\xef\xbb\xbf"
CHATCLI_ENCRYPTED_MAGIC = b"CHATCLI_ENC_v1\n"

# Strings are removed before bracket counting; brackets inside them are not nesting. UTF-8
# never uses ASCII bytes inside a multi-byte character, so this is safe on raw bytes.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(rb"[\[\]{}]")
_BLANK_PREFIXES = frozenset((b"", b" ", b"\t", b"\r", b"\n"))

# Archives are refused with these reasons unless an archive format (`claude-code-requests`)
# recognises what is inside; `Source.archive` tells the registry which one it is.
ARCHIVE_MAGIC = {b"PK\x03\x04": "zip", b"\x1f\x8b": "gzip", b"SQLite format 3\x00": "sqlite"}

_MAGIC_REASONS = (
    (b"PK\x03\x04", "this ZIP archive holds nothing ctxsim reads: it reads a Cline or Roo Code "
     "task folder (api_conversation_history.json), an OpenHands session or V1 conversation "
     "(events/), an OpenCode storage folder, a codex exec stream or Claude Code request logs "
     "in one"),
    (b"\x1f\x8b", "this file is gzip-compressed; decompress it and upload the result"),
    (b"SQLite format 3\x00", "this is an SQLite database without OpenCode's session, message "
     "and part tables"),
    (CHATCLI_ENCRYPTED_MAGIC, "this is an encrypted ChatCLI session (CHATCLI_ENC_v1); "
     "save it unencrypted from ChatCLI and upload that"),
    (b"\xff\xfe\x00\x00", "the file is UTF-32 text; save it as UTF-8"),
    (b"\xff\xfe", "the file is UTF-16 text; save it as UTF-8"),
    (b"\xfe\xff", "the file is UTF-16 text; save it as UTF-8"),
)


def _megabytes(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def check_depth(raw: bytes, *, line: int | None = None) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH; cheap when the text has few brackets."""
    if raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH:
        return
    structural = _JSON_STRING.sub(b"", raw)
    if structural.count(b"{") + structural.count(b"[") <= MAX_DEPTH:
        return
    depth = 0
    for match in _BRACKET.finditer(structural):
        if match.group() in b"[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise TranscriptError(
                    f"the JSON is nested deeper than {MAX_DEPTH} levels", line=line
                )
        else:
            depth -= 1


def _decode(raw: bytes, *, first_line: int = 1) -> str:
    """Strict UTF-8 decoding whose error names the line and column of the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = first_line + raw.count(b"\n", 0, error.start)
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise TranscriptError(
            f"the file is not UTF-8 text (invalid byte 0x{raw[error.start]:02x})",
            line=line,
            column=column,
        ) from None


class _BadLine:
    """A JSON Lines line that did not parse; fatal unless it turns out to be the last one."""

    __slots__ = ("error", "cut_off")

    def __init__(self, error: TranscriptError, cut_off: bool):
        self.error = error
        self.cut_off = cut_off


class _Glued:
    """A JSON Lines line holding several values written one after another, no line break."""

    __slots__ = ("values",)

    def __init__(self, values: list[Any]):
        self.values = values


def _split_glued(text: str) -> list[Any] | None:
    """The values of a line that holds several written together, or None if it does not
    split into whole values."""
    decoder, values, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        if text[pos].isspace():
            pos += 1
            continue
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:  # JSONDecodeError, or a number too long to convert
            return None
        values.append(value)
    return values if len(values) > 1 else None


def _parse_line(line_no: int, raw: bytes, glued: bool = False) -> Any:
    """Parse one JSON Lines line; return the value, a `_Glued` when `glued` allows a line of
    several values, or a `_BadLine` (checks that are fatal anywhere, such as NUL bytes and
    nesting, raise at once)."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise TranscriptError(
            "the file contains binary data (a NUL byte)", line=line_no, column=nul + 1
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        # A line cut in the middle of a multi-byte character ends with an incomplete one.
        cut_off = error.reason == "unexpected end of data"
        try:
            _decode(raw, first_line=line_no)
        except TranscriptError as decode_error:
            return _BadLine(decode_error, cut_off)
        raise AssertionError("unreachable") from None
    check_depth(raw, line=line_no)
    try:
        return jsontext.loads(text)
    except json.JSONDecodeError as error:
        if glued and error.msg == "Extra data" and (values := _split_glued(text)) is not None:
            return _Glued(values)
        stripped = text.rstrip()
        cut_off = stripped.lstrip()[:1] in ("{", "[") and (
            error.msg.startswith("Unterminated string") or error.pos >= len(stripped)
        )
        return _BadLine(
            TranscriptError(f"malformed JSON ({error.msg})", line=line_no, column=error.colno),
            cut_off,
        )
    except RecursionError:
        raise TranscriptError(
            f"the JSON is nested deeper than {MAX_DEPTH} levels", line=line_no
        ) from None


class Source:
    """One transcript file, given as a path or a binary stream, ready to be read (again).

    Opening checks what needs only the first bytes: size limit, empty file, known binary
    formats, UTF-16, NUL bytes and invalid UTF-8 at the start.
    """

    def __init__(self, origin: str | os.PathLike[str] | IO[bytes], *, max_bytes: int):
        self.max_bytes = max_bytes
        self.warnings: list[str] = []
        # "zip" or "gzip" for an archive, with the reason it is refused when no archive
        # format takes it.
        self.archive: str | None = None
        self.archive_reason = ""
        self._path: str | None = None
        self._stream: IO[bytes] | None = None
        self._start = 0
        if isinstance(origin, (str, os.PathLike)):
            self._path = os.fspath(origin)
            try:
                size = os.path.getsize(self._path)
            except OSError as error:
                raise TranscriptError(f"cannot read the file ({error.strerror})") from None
            self._check_size(size)
        else:
            self._stream = self._seekable(origin)
        self.head = self._read_head()
        self._check_head()

    # -- opening ---------------------------------------------------------------------------

    def _check_size(self, size: int) -> None:
        if size > self.max_bytes:
            raise TranscriptError(
                f"the file is {_megabytes(size)}, over the {_megabytes(self.max_bytes)} limit"
            )

    def _seekable(self, stream: IO[bytes]) -> IO[bytes]:
        seekable = getattr(stream, "seekable", None)
        if seekable is not None and seekable():
            self._start = stream.tell()
            size = stream.seek(0, io.SEEK_END) - self._start
            stream.seek(self._start)
            self._check_size(size)
            return stream
        # A pipe or socket can be read once; spool it (to disk past a few MB) so the probe
        # and the parse can both start from the beginning.
        spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115
        total = 0
        while True:
            # Typed as bytes, but a stream opened as text gives str: refuse it by name.
            chunk: bytes | str = stream.read(1024 * 1024)
            if not chunk:
                break
            if isinstance(chunk, str):
                raise TranscriptError("the upload was opened as text; open it in binary mode")
            total += len(chunk)
            self._check_size(total)
            spool.write(chunk)
        spool.seek(0)
        return spool

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        """A binary stream positioned at the start of the file."""
        if self._path is not None:
            with open(self._path, "rb") as handle:
                yield handle
        else:
            assert self._stream is not None
            self._stream.seek(self._start)
            yield self._stream

    def _read_head(self) -> bytes:
        with self.open() as stream:
            head: bytes | str = stream.read(HEAD_BYTES)
        if isinstance(head, str):
            raise TranscriptError("the upload was opened as text; open it in binary mode")
        return head

    def _check_head(self) -> None:
        head = self.head
        if not head.strip():
            if len(head) < HEAD_BYTES:
                raise TranscriptError("the file is empty")
            return
        for magic, reason in _MAGIC_REASONS:
            if head.startswith(magic):
                if magic in ARCHIVE_MAGIC:
                    self.archive, self.archive_reason = ARCHIVE_MAGIC[magic], reason
                    return
                raise TranscriptError(reason)
        nul = head.find(b"\x00")
        if nul >= 0:
            line = head.count(b"\n", 0, nul) + 1
            column = nul - (head.rfind(b"\n", 0, nul) + 1) + 1
            raise TranscriptError(
                "this is a binary file, not a text transcript (it contains NUL bytes)",
                line=line,
                column=column,
            )
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as error:
            # The head, or a file still being written, may end inside a character: that is
            # for the line reader to judge. Any other invalid byte is an error now.
            if error.reason != "unexpected end of data":
                _decode(head)

    # -- line access -----------------------------------------------------------------------

    def lines(self) -> Iterator[tuple[int, bytes]]:
        """(1-based line number, raw bytes) for every line, the BOM removed from the first."""
        with self.open() as stream:
            first = stream.readline()
            if not first:
                return
            yield 1, first[3:] if first.startswith(UTF8_BOM) else first
            yield from enumerate(stream, start=2)

    def records(self, glued: bool = False) -> Iterator[tuple[int, Any]]:
        """(line number, parsed value) for every non-blank JSON Lines line.

        A line that fails to parse is held back until the next non-blank line shows it was
        not the last; a cut-off last line is then skipped with a warning. `glued`: a line
        holding several values written together (a writer that left out a line break) gives
        each of them, with a warning.
        """
        pending: _BadLine | None = None
        pending_line = 0
        joined = 0
        for line_no, raw in self.lines():
            if raw[:1] in _BLANK_PREFIXES and not raw.strip():
                continue
            if pending is not None:
                if pending.cut_off:
                    raise TranscriptError(
                        "this line is not a complete JSON value (cut off before its end, or "
                        "not a JSON Lines file), and more lines follow it",
                        line=pending_line,
                    )
                raise pending.error
            value = _parse_line(line_no, raw, glued)
            if type(value) is _BadLine:
                pending, pending_line = value, line_no
                continue
            if type(value) is _Glued:
                joined += 1
                yield from ((line_no, v) for v in value.values)
                continue
            yield line_no, value
        if joined:
            self.warnings.append(f"{joined} line(s) held records written together without a "
                                 "line break; each record was read")
        if pending is not None:
            if not pending.cut_off:
                raise pending.error
            self.warnings.append(
                f"line {pending_line} was cut off before its end (a session still being "
                "written?) and was skipped"
            )

    def document(self) -> Any:
        """The whole file parsed as one JSON document."""
        with self.open() as stream:
            raw = stream.read(self.max_bytes + 1)
        self._check_size(len(raw))
        if raw.startswith(UTF8_BOM):
            raw = raw[3:]
        nul = raw.find(b"\x00")
        if nul >= 0:
            line = raw.count(b"\n", 0, nul) + 1
            raise TranscriptError("the file contains binary data (a NUL byte)", line=line)
        text = _decode(raw)
        check_depth(raw)
        del raw
        try:
            return jsontext.loads(text)
        except json.JSONDecodeError as error:
            raise TranscriptError(
                f"malformed JSON ({error.msg})", line=error.lineno, column=error.colno
            ) from None
        except RecursionError:
            raise TranscriptError(f"the JSON is nested deeper than {MAX_DEPTH} levels") from None


_NOT_LOADED = object()


class Probe:
    """What detection looks at: the first lines parsed on their own, or the whole document.

    `records` holds up to PROBE_LINES parsed lines when the first line is a complete JSON
    value by itself (JSON Lines, or a one-line document). `document()` parses the file as
    one JSON document and returns None for JSON Lines with several records.
    """

    def __init__(self, source: Source):
        self.source = source
        self.head = source.head[3:] if source.head.startswith(UTF8_BOM) else source.head
        self.records: list[Any] = []
        self.is_jsonl = False
        self._document: Any = _NOT_LOADED
        self._read_first_lines()

    def _read_first_lines(self) -> None:
        total = 0
        first = True
        for line_no, raw in self.source.lines():
            if raw[:1] in _BLANK_PREFIXES and not raw.strip():
                continue
            if not first:
                # A second non-blank line after a complete first value: JSON Lines.
                self.is_jsonl = True
            try:
                value = _parse_line(line_no, raw)
            except TranscriptError:
                value = None
                if first:
                    return
                break
            if type(value) is _BadLine:
                if first:
                    return
                break
            self.records.append(value)
            first = False
            total += len(raw)
            # Two records are needed to tell JSON Lines from a one-line document.
            enough_bytes = total >= PROBE_BYTES and len(self.records) >= 2
            if len(self.records) >= PROBE_LINES or enough_bytes:
                break

    def document(self) -> Any:
        """The parsed document; None when the file is JSON Lines."""
        if self.is_jsonl:
            return None
        if self._document is _NOT_LOADED:
            if len(self.records) == 1:
                self._document = self.records[0]
            else:
                self._document = self.source.document()
        return self._document

    @property
    def first_record(self) -> Any:
        return self.records[0] if self.records else None
