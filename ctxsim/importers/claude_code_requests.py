"""Claude Code request bodies (SPEC §12): the directory `OTEL_LOG_RAW_API_BODIES=file:<dir>`
makes Claude Code write, uploaded as a `.zip` or `.tar.gz`.

Layout (from the SPEC; no public sample exists yet, see the fixtures' README): `index.jsonl`,
one line per Messages API request with `session_id`, `request_file`, `response_file`, …; each
request file is the request exactly as sent (`model`, `system`, `tools`, `messages`, …); a
response file is the answer's assistant message. Without an index, every `*.request.json` is
read and its session taken from `metadata.user_id` (a JSON string with `session_id`, or the
older `user_…_session_<uuid>` text), and responses are paired with requests (`_pair`): by the
same name first; Claude Code names a response by the API's request id, which its request's
name does not carry, so then by content (a response is the assistant message a later request
of the chain sends after the request's messages), and last by time (the one response written
between a request and the next). A response left unpaired, or a chain whose last answer is
missing, is a warning on the session.

One session per `session_id`. Calls whose requests continue one another (same system prompt
and first message) form a chain; the longest chain is the session, the others (subagents,
title and summary calls) its sidechains. A chain's history is its last request's messages
plus the last response, so the system prompt and tool definitions are the ones really sent.
Each call's recorded request is kept in `meta["recorded_requests"]`: which file, how many
messages it sent and whether they are exactly the history's prefix (a compacted request is
not), so a replay can be compared call by call with what Claude Code sent.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Any

from ctxsim.pipeline.messages import Session

from . import anthropic_messages
from .archive import Archive as _Archive
from .archive import archive_bytes as archive_bytes  # re-exported for tests
from .archive import json_member
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "claude-code-requests"
LINE_BASED = False
ARCHIVE = True

_LEGACY_SESSION = re.compile(r"session_([0-9a-fA-F-]{8,})")


def _index_name(names: list[str]) -> str | None:
    candidates = [n for n in names if posixpath.basename(n) == "index.jsonl"]
    return min(candidates, key=lambda n: (n.count("/"), n)) if candidates else None


def _request_names(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.endswith(".request.json"))


# -- detection ---------------------------------------------------------------------------------


def detect(probe: Probe) -> bool | str:
    if not probe.source.archive:
        return "not a .zip or .tar.gz of Claude Code's request bodies"
    try:
        archive = _Archive(probe.source)
    except TranscriptError as error:
        return str(error)
    try:
        if _index_name(archive.names) or _request_names(archive.names):
            return True
        return "the archive has no index.jsonl and no *.request.json file"
    finally:
        archive.close()


# -- the calls ---------------------------------------------------------------------------------


@dataclass
class _Call:
    order: int
    file: str
    session_id: str
    request: dict[str, Any]
    response: dict[str, Any] | None
    index_entry: dict[str, Any] = field(default_factory=dict)
    response_file: str | None = None

    @property
    def messages(self) -> list[Any]:
        value = self.request.get("messages")
        return value if isinstance(value, list) else []


def _session_of(request: dict[str, Any]) -> str:
    metadata = request.get("metadata")
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    if isinstance(user_id, str):
        try:
            decoded = json.loads(user_id)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("session_id"), str):
            return decoded["session_id"]
        match = _LEGACY_SESSION.search(user_id)
        if match:
            return match.group(1)
    return ""


def _member_for(names: list[str], base: str, reference: Any) -> str | None:
    """The archive member an index line points at: relative to the index, or by file name
    (the index may hold absolute paths of the machine that wrote it)."""
    if not isinstance(reference, str) or not reference:
        return None
    wanted = posixpath.normpath(posixpath.join(base, reference.replace("\\", "/")))
    if wanted in names:
        return wanted
    leaf = posixpath.basename(reference.replace("\\", "/"))
    matches = [n for n in names if posixpath.basename(n) == leaf]
    return min(matches, key=len) if matches else None


def _read_calls(archive: _Archive, warnings: list[str]) -> list[_Call]:
    names = archive.names
    index = _index_name(names)
    calls: list[_Call] = []
    if index is not None:
        base = posixpath.dirname(index)
        text = archive.read(index).decode("utf-8", "replace")
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as error:
                raise TranscriptError(f"index.jsonl: malformed JSON ({error})",
                                      line=line_no) from None
            if not isinstance(entry, dict):
                raise TranscriptError(
                    f"index.jsonl: a line should be an object, not {type_name(entry)}",
                    line=line_no)
            request_name = _member_for(names, base, entry.get("request_file"))
            if request_name is None:
                raise TranscriptError(
                    f"index.jsonl: the request file {entry.get('request_file')!r} is not in "
                    "the archive", line=line_no)
            calls.append(_call(archive, len(calls), request_name,
                               _member_for(names, base, entry.get("response_file")), entry))
    else:
        for name in _request_names(names):
            response = name[: -len(".request.json")] + ".response.json"
            calls.append(_call(archive, len(calls), name,
                               response if response in names else None, {}))
        # No index to give the order: a later call of a chain sends a longer history.
        calls.sort(key=lambda c: (len(c.messages), c.file))
        warnings += _pair(archive, calls)
    return calls


def _response_names(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.endswith(".response.json"))


def _pair(archive: _Archive, calls: list[_Call]) -> list[str]:
    """Give the calls without a same-named response theirs (see the module's docstring);
    returns the warnings for what is left unpaired."""
    taken = {c.response_file for c in calls if c.response_file}
    loose: dict[str, dict[str, Any]] = {}
    for name in _response_names(archive.names):
        if name not in taken:
            response = json_member(archive, name)
            if isinstance(response, dict):
                loose[name] = response
    # By content: the next request of a chain repeats the call's answer after its messages.
    by_content: dict[str, list[str]] = {}
    for name, response in loose.items():
        by_content.setdefault(_content_key(response.get("content")), []).append(name)
    chains: dict[tuple[str, str], list[_Call]] = {}
    for call in calls:
        chains.setdefault((call.session_id, _fingerprint(call)), []).append(call)
    for chain in chains.values():
        chain.sort(key=lambda c: len(c.messages))
        for call, following in zip(chain, chain[1:], strict=False):
            if call.response is not None or len(following.messages) <= len(call.messages):
                continue
            answer = following.messages[len(call.messages)]
            if not isinstance(answer, dict) or answer.get("role") != "assistant":
                continue
            names = [n for n in by_content.get(_content_key(answer.get("content")), [])
                     if n in loose]
            if names:
                _give(call, names[0], loose.pop(names[0]))
    # By time: the one loose response written after the call and before the next request.
    starts = sorted(archive.mtime(c.file) for c in calls)
    for call in (c for c in calls if c.response is None):
        begin = archive.mtime(call.file)
        end = min((t for t in starts if t > begin), default=float("inf"))
        found = [n for n in loose if begin <= archive.mtime(n) < end]
        if len(found) == 1:
            _give(call, found[0], loose.pop(found[0]))
    warnings = []
    if loose:
        shown = ", ".join(posixpath.basename(n) for n in list(loose)[:5])
        warnings.append(f"{len(loose)} response file(s) could not be paired with a request "
                        f"({shown}{', …' if len(loose) > 5 else ''}); their answers are left out")
    return warnings


def _content_key(content: Any) -> str:
    return json.dumps(_without_cache(content), sort_keys=True, ensure_ascii=False, default=str)


def _give(call: _Call, name: str, response: dict[str, Any]) -> None:
    call.response = response
    call.response_file = name


def _call(archive: _Archive, order: int, request_name: str, response_name: str | None,
          entry: dict[str, Any]) -> _Call:
    request = json_member(archive, request_name)
    if not isinstance(request, dict):
        raise TranscriptError(f"{request_name}: a request should be an object, "
                              f"not {type_name(request)}")
    if not isinstance(request.get("messages"), list):
        raise TranscriptError(f"{request_name}: the request has no `messages` list")
    response = json_member(archive, response_name) if response_name else None
    if response is not None and not isinstance(response, dict):
        raise TranscriptError(f"{response_name}: a response should be an object")
    session_id = entry.get("session_id") if isinstance(entry.get("session_id"), str) else ""
    return _Call(order, request_name, session_id or _session_of(request) or "unknown-session",
                 request, response, entry, response_name if response is not None else None)


# -- chains and sessions -----------------------------------------------------------------------


def _fingerprint(call: _Call) -> str:
    first = call.messages[0] if call.messages else None
    head = json.dumps([call.request.get("system"), _without_cache(first)], sort_keys=True,
                      ensure_ascii=False, default=str)
    return hashlib.sha256(head.encode("utf-8", "surrogatepass")).hexdigest()


def _without_cache(value: Any) -> Any:
    """The value without `cache_control` markers, which move between calls."""
    if isinstance(value, dict):
        return {k: _without_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache(v) for v in value]
    return value


class _Document:
    """What `anthropic_messages.parse` reads: an object with `document()`."""

    def __init__(self, document: dict[str, Any]):
        self._document = document

    def document(self) -> dict[str, Any]:
        return self._document


def _chain_session(chain: list[_Call], session_id: str, key: str, parent: str | None) -> Session:
    last = chain[-1]
    history = list(last.messages)
    if last.response is not None and isinstance(last.response.get("content"), list):
        history.append({"role": "assistant", "content": last.response["content"],
                        **({"usage": last.response["usage"]}
                           if isinstance(last.response.get("usage"), dict) else {})})
    document: dict[str, Any] = {
        key_: last.request[key_] for key_ in ("model", "system", "tools", "max_tokens")
        if key_ in last.request
    }
    document["messages"] = history
    try:
        parsed = anthropic_messages.parse(_Document(document))[0]  # type: ignore[arg-type]
    except TranscriptError as error:
        raise TranscriptError(f"{last.file}: {error}") from None
    final = [_without_cache(m) for m in history]
    recorded = []
    for call in chain:
        sent = [_without_cache(m) for m in call.messages]
        usage = call.response.get("usage") if isinstance(call.response, dict) else None
        recorded.append({
            "request_file": call.file,
            "messages": len(sent),
            "matches_history": sent == final[: len(sent)],
            "model": call.request.get("model"),
            "system_blocks": _count(call.request.get("system")),
            "tools": _count(call.request.get("tools")),
            **({"usage": usage} if isinstance(usage, dict) else {}),
        })
    meta = dict(parsed.meta)
    meta.update(session_id=session_id, recorded_requests=recorded,
                system_prompt_recorded=True)
    if parent is not None:
        meta["sidechain"] = True
    return replace(parsed, format=NAME, key=key, parent_key=parent, meta=meta)


def _count(value: Any) -> int:
    if isinstance(value, list):
        return len(value)
    return 1 if value else 0


def parse(source: Source) -> list[Session]:
    archive = _Archive(source)
    warnings: list[str] = []
    try:
        calls = _read_calls(archive, warnings)
    finally:
        archive.close()
    if not calls:
        raise TranscriptError("the archive's index lists no request")
    by_session: dict[str, list[_Call]] = {}
    for call in calls:
        by_session.setdefault(call.session_id, []).append(call)
    sessions: list[Session] = []
    for session_id, session_calls in by_session.items():
        chains: dict[str, list[_Call]] = {}
        for call in sorted(session_calls, key=lambda c: c.order):
            chains.setdefault(_fingerprint(call), []).append(call)
        ordered = sorted(chains.values(), key=lambda c: (-len(c), c[0].order))
        main, others = ordered[0], sorted(ordered[1:], key=lambda c: c[0].order)
        if main[-1].response is None:
            warnings.append(f"{posixpath.basename(main[-1].file)}: its response is not in the "
                            "archive; the session ends with the request's last message")
        sessions.append(_chain_session(main, session_id, session_id, None))
        for number, chain in enumerate(others, start=1):
            sessions.append(_chain_session(chain, session_id, f"{session_id}:chain-{number}",
                                           session_id))
    if warnings:
        sessions[0] = replace(sessions[0], warnings=(*sessions[0].warnings, *warnings))
    return sessions
