"""Redaction of an upload that is stored before it is imported (SPEC §12).

A background import keeps the upload in the default storage until the worker reads it, so the
secrets are replaced in the raw file first: the original bytes are never written anywhere.
The pure patterns live in `ctxsim.importers.redact`; this module only streams a file through
them. Archives (`.zip`, `.tar.gz`) and SQLite databases (OpenCode's `opencode.db`) cannot be
rewritten line by line; they are imported during the request instead (`is_archive`), where
the parsed sessions are redacted before saving.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from typing import IO

from django.core.files import File

from ctxsim.importers.redact import merge_counts, redact_lines, redact_text

ARCHIVE_MAGIC = (b"PK\x03\x04", b"\x1f\x8b", b"SQLite format 3\x00")


def is_archive(stream: IO[bytes]) -> bool:
    """Whether the stream starts like a ZIP, gzip or SQLite file (rewound afterwards)."""
    start = stream.tell()
    head = stream.read(16)
    stream.seek(start)
    return isinstance(head, bytes) and head.startswith(ARCHIVE_MAGIC)


def redacted_copy(stream: IO[bytes]) -> tuple[File, dict[str, int]]:
    """A temporary file holding the stream with every secret replaced, and the counts.

    The copy is read line by line, so a 200 MB JSON Lines file is never held whole; the
    caller closes the returned file.
    """
    counts: Counter[str] = Counter()
    spool = tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024)  # noqa: SIM115
    for line, found in redact_lines(iter(stream.readline, b"")):
        spool.write(line)
        counts.update(found)
    spool.seek(0)
    return File(spool), merge_counts(counts)


def displayed_name(name: str, team) -> str:
    """An uploaded file's name as stored for display (it is untrusted text too)."""
    return redact_text(name)[0] if getattr(team, "redact_secrets", True) else name
