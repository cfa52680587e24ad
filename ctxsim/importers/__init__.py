"""Transcript importers: detect a file's format by content and map it to canonical sessions.

Pure Python (no Django). Public API:

- `FORMATS`: the format names, in detection order.
- `detect(source, *, max_bytes=...) -> str`: the format of a file, decided by its content
  (first bytes, first lines, keys), never by its name.
- `load(source, format=None, *, max_bytes=...) -> ImportResult`: every session of the file.
- `TranscriptError`: the only exception either raises; `str(error)` is one line for the user,
  with line and column when the problem has a position.

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
    anthropic_messages,
    chatcli,
    claude_code,
    claude_code_requests,
    codex,
    codex_legacy,
    openai_chat,
    openai_responses,
    openhands,
    openhands_eval,
    scenario,
    swe_agent,
)
from .errors import TranscriptError
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
# Anthropic blocks or ChatCLI fields).
_REGISTRY: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        claude_code_requests,  # archives only: it never claims a text file
        claude_code,
        codex,
        codex_legacy,
        openhands_eval,
        scenario,
        swe_agent,
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


def _detect(probe: Probe) -> str:
    if probe.source.archive:
        # Only an archive format can read an archive; anything else keeps its plain refusal.
        if claude_code_requests.detect(probe) is True:
            return claude_code_requests.NAME
        raise TranscriptError(probe.source.archive_reason)
    reasons = []
    for name, module in _REGISTRY.items():
        if getattr(module, "ARCHIVE", False):
            continue  # reads archives only (above); named last below
        verdict = module.detect(probe)
        if verdict is True:
            return name
        reasons.append(f"{name} ({verdict})")
    reasons += [f"{name} ({module.detect(probe)})" for name, module in _REGISTRY.items()
                if getattr(module, "ARCHIVE", False)]
    raise TranscriptError("unknown transcript format; tried " + "; ".join(reasons))


def detect(source: PathOrStream, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The format name of a transcript, from its content alone."""
    return _detect(Probe(Source(source, max_bytes=max_bytes)))


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
    opened = Source(source, max_bytes=max_bytes)
    if format is None:
        format = _detect(Probe(opened))
    module = _REGISTRY[format]
    if opened.archive and not getattr(module, "ARCHIVE", False):
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
    """SWE-agent records only per-trajectory totals (`model_stats`), not per call."""
    stats = meta.get("model_stats")
    if not isinstance(stats, dict) or not isinstance(stats.get("tokens_sent"), int):
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
