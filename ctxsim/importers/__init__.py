"""Transcript importers: detect a file's format by content and map it to canonical sessions.

Pure Python (no Django). Public API:

- `FORMATS`: the format names, in detection order.
- `detect(source, *, max_bytes=...) -> str`: the format of a file, decided by its content
  (first bytes, first lines, keys), never by its name.
- `load(source, format=None, *, max_bytes=...) -> ImportResult`: every session of the file.
- `TranscriptError`: the only exception either raises; `str(error)` is one line for the user,
  with line and column when the problem has a position, and `error.details` the facts behind
  it (for an unknown format: why each format did not match; the line names the nearest).

`source` is a path or a binary stream (an upload). Guarantees: JSON Lines formats stream the
file line by line; all checks of SPEC §7 run before anything is returned, so a failed import
returns nothing at all; warnings (a skipped cut-off last line, branches left out) come back
with the result.
"""

from __future__ import annotations

import gc
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import IO

from ctxsim.pipeline.messages import Session
from ctxsim.pipeline.usage import provider_family, recorded_per_call, session_totals

from . import (
    aider,
    anthropic_messages,
    archive,
    chatcli,
    claude_code,
    claude_code_requests,
    cline,
    codex,
    codex_exec,
    codex_legacy,
    gemini_cli,
    gemini_cli_jsonl,
    mini_swe_agent,
    openai_chat,
    openai_responses,
    opencode,
    openhands,
    openhands_eval,
    openhands_v1,
    openhands_v1_eval,
    roo_code,
    scenario,
    swe_agent,
)
from .errors import Near, TranscriptError
from .source import DEFAULT_MAX_BYTES, Probe, Source

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FORMATS",
    "ImportResult",
    "TranscriptError",
    "detect",
    "load",
    "load_sessions",
]

# Detection order: line formats first (their signatures are specific), then documents from the
# most specific keys to the most generic (a bare messages array is OpenAI Chat unless it shows
# Anthropic blocks or ChatCLI fields). Agent formats whose files are also valid generic chats
# (mini-swe-agent's `messages`, Cline's Anthropic-shaped history) come before the generic ones,
# so they are never imported as plain chats. Archives (and OpenCode's SQLite database) are
# offered only to the modules that read them (`ARCHIVE`: only archives; `ACCEPTS_ARCHIVE`:
# archives and single files).
_REGISTRY: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        claude_code_requests,  # archives only: it never claims a text file
        aider,  # Markdown: decided from the first bytes, before any JSON document is parsed
        claude_code,
        codex,
        codex_legacy,
        codex_exec,
        gemini_cli_jsonl,
        openhands_v1_eval,
        openhands_eval,
        openhands_v1,
        scenario,
        swe_agent,
        mini_swe_agent,
        gemini_cli,
        roo_code,
        cline,
        opencode,
        chatcli,
        openhands,
        openai_responses,
        anthropic_messages,
        openai_chat,
    )
}

FORMATS: tuple[str, ...] = tuple(_REGISTRY)

PathOrStream = str | os.PathLike[str] | IO[bytes]


@dataclass(frozen=True)
class ImportResult:
    """What one file yielded: its format, its sessions in file order, and warnings."""

    format: str
    sessions: list[Session]
    warnings: list[str] = field(default_factory=list)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a file is mapped.

    Parsing allocates millions of short-lived containers while the retained history grows;
    each collection would rescan that history (about 10% of a large import). The importers
    build no reference cycles, so reference counting frees everything in the meantime.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def reads_archives(module: ModuleType) -> bool:
    return bool(getattr(module, "ARCHIVE", False) or getattr(module, "ACCEPTS_ARCHIVE", False))


def _detect(probe: Probe) -> str:
    archive = probe.source.archive
    verdicts: list[tuple[str, str]] = []
    for name, module in _REGISTRY.items():
        if archive and not reads_archives(module):
            continue  # only an archive format can read an archive
        if not archive and getattr(module, "ARCHIVE", False):
            continue  # reads archives only: named last below
        try:
            verdict = module.detect(probe)
        except TranscriptError as error:
            # Not JSON at all (malformed at a position): that is the answer, unless an
            # earlier format already saw its signature (a broken Aider history, say).
            if not any(isinstance(v, Near) for _, v in verdicts):
                raise
            verdicts.append((name, str(error)))
            break
        if verdict is True:
            return name
        verdicts.append((name, verdict if isinstance(verdict, str) else "no match"))
    if not archive:
        verdicts += [(name, module.detect(probe)) for name, module in _REGISTRY.items()
                     if getattr(module, "ARCHIVE", False)]
    raise unknown_format(probe, verdicts)


def unknown_format(probe: Probe, verdicts: list[tuple[str, str]]) -> TranscriptError:
    """One line naming the nearest format and what did not match; every format's reason goes
    into the details."""
    details = [f"{name}: {verdict}" for name, verdict in verdicts]
    near = [(name, verdict) for name, verdict in verdicts if isinstance(verdict, Near)]
    if near:
        best = max(range(len(near)), key=lambda i: (near[i][1].score, -i))
        name, verdict = near[best]
        line = f"unknown transcript format: closest is {name}, but {verdict}"
    elif probe.source.archive:
        line = probe.source.archive_reason
    else:
        line = f"unknown transcript format: {describe_shape(probe)} matches none of the " \
               f"{len(verdicts)} formats ctxsim reads"
    return TranscriptError(line, details=details)


def describe_shape(probe: Probe) -> str:
    """What the file looks like, in a few words, for the unknown-format line."""
    def keys(value: object) -> str:
        names = list(value)[:6] if isinstance(value, dict) else []
        # Keys are the file's own text: a few, each shortened, keep the line short.
        return ", ".join(f"`{k[:40]}`" for k in names) or "no keys"

    if probe.is_jsonl:
        first = probe.first_record
        return f"JSON Lines whose first line has {keys(first)}" if isinstance(first, dict) \
            else "JSON Lines of non-objects"
    if not probe.records and probe.head.lstrip()[:1] not in (b"{", b"["):
        return "text that is not JSON"
    try:
        document = probe.document()
    except TranscriptError:
        return "text that is not valid JSON"
    if isinstance(document, dict):
        return f"a JSON object with {keys(document)}"
    if isinstance(document, list):
        first = next((item for item in document if isinstance(item, dict)), None)
        return f"a JSON array ({len(document)} items, the first with {keys(first)})" \
            if first is not None else f"a JSON array of {len(document)} non-objects"
    return "a single JSON value"


def _opened(source: PathOrStream, max_bytes: int) -> Source:
    """The file as a `Source`; a directory (a Cline task folder, an OpenHands V1 conversation,
    OpenCode's storage) is read as the zip of its files, like its upload."""
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        folder = Source(io.BytesIO(archive.folder_bytes(os.fspath(source), max_bytes)),
                        max_bytes=max_bytes)
        folder.archive_reason = ("this folder is not a transcript folder (a Cline or Roo Code "
                                 "task, an OpenHands V1 conversation, OpenCode's storage)")
        return folder
    return Source(source, max_bytes=max_bytes)


def detect(source: PathOrStream, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The format name of a transcript, from its content alone."""
    return _detect(Probe(_opened(source, max_bytes)))


def load(
    source: PathOrStream, format: str | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES
) -> ImportResult:
    """Import every session of a transcript file, or raise `TranscriptError`.

    `format` forces a format (one of FORMATS) instead of detecting it. Nothing is returned
    unless the whole file imported.
    """
    if format is not None and format not in _REGISTRY:
        raise TranscriptError(
            f"unknown format {format!r}; use one of: {', '.join(FORMATS)}"
        )
    opened = _opened(source, max_bytes)
    if format is None:
        format = _detect(Probe(opened))
    module = _REGISTRY[format]
    if opened.archive and not reads_archives(module):
        raise TranscriptError(opened.archive_reason)
    try:
        with _collector_paused():
            sessions = module.parse(opened)
    except TranscriptError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        # A shape no check anticipated: still one line, never a traceback for the user.
        raise TranscriptError(
            f"the file does not have the structure of a {format} transcript "
            f"({type(error).__name__}: {error})"
        ) from error
    sessions = [with_usage_facts(session) for session in sessions]
    warnings = list(opened.warnings)
    for session in sessions:
        warnings.extend(session.warnings)
    return ImportResult(format=format, sessions=list(sessions), warnings=warnings)


def with_usage_facts(session: Session) -> Session:
    """The session with what SPEC §11 needs from every format: its provider family (on the
    session and on each image, for the `auto` image rule), the recorded totals, and a warning
    for images whose header could not be read (counted as base64/4)."""
    family = provider_family(session.format, session.meta.get("model"))
    unreadable = 0
    for message in session.messages:
        for part in message.meta.get("binary_parts", ()) or ():
            if part.get("type") != "image":
                continue
            if family and "provider" not in part:
                # Parts are the importer's own fresh dicts, not yet shared with anyone.
                part["provider"] = family
            unreadable += bool(part.get("unreadable"))
    meta = dict(session.meta)
    if family:
        meta["provider"] = family
    totals = session_totals(recorded_per_call(session.messages))
    if totals is None:
        totals = _trajectory_totals(meta)
    if totals is not None:
        meta["recorded_totals"] = totals
    warnings = session.warnings
    if unreadable:
        warnings = (*warnings, f"{unreadable} image(s) with an unreadable header are counted "
                               "as base64/4 tokens")
    return replace(session, meta=meta, warnings=warnings)


def _trajectory_totals(meta: dict) -> dict | None:
    """SWE-agent records only per-trajectory totals (`model_stats`), not per call. A
    trajectory replayed from a demonstration records zeros (`tokens_sent` 0 and no API call):
    nothing was billed, so nothing is recorded."""
    stats = meta.get("model_stats")
    if not isinstance(stats, dict) or not isinstance(stats.get("tokens_sent"), int) or \
            not stats["tokens_sent"]:
        return None
    return {
        "calls": stats.get("api_calls"), "total_input": stats["tokens_sent"],
        "output": stats.get("tokens_received"), "input": None, "cache_read": None,
        "cache_write": None, "reasoning": None, "cache_read_share": None, "per_call": False,
    }


def load_sessions(path: str | os.PathLike[str], raw: bytes | None = None) -> list[Session]:
    """Sessions of a file, for callers that only need them (`simulate`); `raw`, when given,
    is the file's content already read."""
    source: PathOrStream = io.BytesIO(raw) if raw is not None else path
    return load(source).sessions
