"""OpenCode sessions, from any of its three stores: the `opencode export <id>` JSON
(`{info, messages: [{info, parts}]}`), the file-per-object storage tree
(`storage/session/<project>/<ses>.json`, `storage/message/<ses>/<msg>.json`,
`storage/part/<msg>/<prt>.json`) uploaded as an archive (or its files uploaded together), and
the SQLite `opencode.db` (tables `session`, `message`, `part`, the last two with a JSON `data`
column). One session per OpenCode session; a sub-agent session (`parentID`) links to its
parent.

Mapping: an assistant message holds one model call per step (`step-start` … `step-finish`):
each step becomes an assistant message with its `text` parts and one call per `tool` part
(`callID`, `tool`, `state.input`), the completed ones answered by a `tool` message
(`state.output`; `state.status: "error"` → `is_error` with `state.error`); a call still
`pending`/`running` has no result in the file. A message without steps is one call. User
messages: `text` parts (not `ignored` ones), `file` parts as binary metadata.

The system prompt, where a release recorded it (the first assistant message's `system`
list), leads the session as system messages.

Recorded usage (SPEC §11): each `step-finish`'s `tokens` (else the message's): `total_input` =
`input + cache.read + cache.write` (Anthropic-style: `input` excludes the cache), or `input`
alone for an OpenAI-style provider before OpenCode subtracted the cache from it
(`_cache_inside`), `reasoning`.

Recorded compactions (SPEC-agents §2.5.0.5): a user message with a `compaction` part is the
request (sent as "What did we do so far?", `meta.opencode_compaction_request`), the assistant
message `summary: true` that answers it gets `meta.compaction = {"source": "opencode",
"kind": "summary", "trigger": "auto"|"manual", "pre_tokens"}`; pruned outputs
(`state.time.compacted`) keep their text and get `meta.opencode_pruned`. The session's
`version` is kept as `agent_version`.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .archive import Archive, json_member
from .common import (
    HistoryBuilder,
    compact_json,
    data_url_part,
    expect_dict,
    expect_list,
    iso_from_ms,
    obj,
    require_sessions,
    title_from,
)
from .errors import Near, TranscriptError, type_name
from .recorded import with_recorded_compactions
from .source import Probe, Source

NAME = "opencode"
ACCEPTS_ARCHIVE = True
LABEL = "OpenCode"
COMPACTION_PROMPT = "What did we do so far?"

Stored = tuple[dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]]]


def _is_export(value: Any) -> bool:
    info = value.get("info") if isinstance(value, dict) else None
    return isinstance(info, dict) and str(info.get("id", "")).startswith("ses_") and \
        isinstance(value.get("messages"), list)


def detect(probe: Probe) -> bool | str:
    if probe.source.archive == "sqlite":
        try:
            with _database(probe.source) as db:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE "
                                                   "type='table'")}
        except (sqlite3.Error, OSError) as error:
            return Near(f"the SQLite database cannot be read ({error})", 1)
        missing = {"session", "message", "part"} - tables
        return True if not missing else Near(
            f"an SQLite database without the table(s) {', '.join(sorted(missing))}", 1)
    if probe.source.archive:
        try:
            with Archive(probe.source) as archive:
                return True if _storage_names(archive)[0] else \
                    "the archive has no OpenCode storage (session/…/ses_*.json)"
        except TranscriptError as error:
            return str(error)
    if probe.is_jsonl:
        return "JSON Lines, not an OpenCode export"
    document = probe.document()
    if _is_export(document):
        return True
    info = document.get("info") if isinstance(document, dict) else None
    if isinstance(info, dict) and str(info.get("id", "")).startswith("ses_"):
        return Near("`info.id` is an OpenCode session id but there is no `messages` list", 3)
    return "no `info.id` starting ses_ with `messages`"


# -- the three stores --------------------------------------------------------------------------


def _storage_names(archive: Archive) -> tuple[list[str], list[str], list[str]]:
    def of(prefix: str) -> list[str]:
        return sorted(n for n in archive.names if n.endswith(".json")
                      and posixpath.basename(n).startswith(prefix))
    return of("ses_"), of("msg_"), of("prt_")


def _from_storage(archive: Archive) -> list[Stored]:
    session_names, message_names, part_names = _storage_names(archive)
    parts: dict[str, list[dict[str, Any]]] = {}
    for name in part_names:
        part = expect_dict(json_member(archive, name), name)
        parts.setdefault(str(part.get("messageID")), []).append(part)
    messages: dict[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
    for name in message_names:
        info = expect_dict(json_member(archive, name), name)
        messages.setdefault(str(info.get("sessionID")), []).append(
            (info, sorted(parts.get(str(info.get("id")), []), key=lambda p: str(p.get("id")))))
    stored = []
    for name in session_names:
        info = expect_dict(json_member(archive, name), name)
        ordered = sorted(messages.get(str(info.get("id")), []), key=lambda m: str(m[0].get("id")))
        stored.append((info, ordered))
    return stored


@contextlib.contextmanager
def _database(source: Source) -> Iterator[sqlite3.Connection]:
    """The database opened read-only from a private copy (an upload is a stream)."""
    handle, path = tempfile.mkstemp(suffix=".db")
    try:
        with os.fdopen(handle, "wb") as out, source.open() as stream:
            shutil.copyfileobj(stream, out)
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        try:
            yield db
        finally:
            db.close()
    finally:
        os.unlink(path)


def _from_database(source: Source) -> list[Stored]:
    def data(raw: Any, where: str) -> dict[str, Any]:
        try:
            value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
        except ValueError:
            raise TranscriptError(f"{LABEL} database: {where} holds malformed JSON") from None
        if not isinstance(value, dict):
            raise TranscriptError(f"{LABEL} database: {where} should be a JSON object")
        return value

    try:
        with _database(source) as db:
            db.row_factory = sqlite3.Row
            sessions = [dict(r) for r in db.execute("SELECT * FROM session ORDER BY id")]
            messages = db.execute("SELECT id, session_id, data FROM message ORDER BY id").fetchall()
            parts = db.execute("SELECT id, message_id, data FROM part ORDER BY id").fetchall()
    except sqlite3.Error as error:
        raise TranscriptError(f"{LABEL} database cannot be read ({error})") from None
    by_message: dict[str, list[dict[str, Any]]] = {}
    for row in parts:
        part = {"id": row["id"], **data(row["data"], f"part {row['id']}")}
        by_message.setdefault(row["message_id"], []).append(part)
    by_session: dict[str, list[tuple[dict[str, Any], list[dict[str, Any]]]]] = {}
    for row in messages:
        info = {"id": row["id"], "sessionID": row["session_id"],
                **data(row["data"], f"message {row['id']}")}
        by_session.setdefault(row["session_id"], []).append((info, by_message.get(row["id"], [])))
    stored = []
    for row in sessions:
        info = {"id": row.get("id"), "title": row.get("title"), "version": row.get("version"),
                "parentID": row.get("parent_id"), "directory": row.get("directory")}
        stored.append((info, by_session.get(str(row.get("id")), [])))
    return stored


# -- mapping -----------------------------------------------------------------------------------


# Before anomalyco/opencode#4256 (merged 2025-11-12) OpenCode stored the provider's
# `inputTokens` as given: OpenAI-style providers count the cached tokens inside it. Since, it
# subtracts them for every provider but the Anthropic SDK's, whose `inputTokens` left the cache
# out: `input` is the uncached part for all.
CACHE_INSIDE_UNTIL_MS = 1_762_905_600_000  # 2025-11-12T00:00Z
ANTHROPIC_PROVIDERS = frozenset({"anthropic", "amazon-bedrock", "google-vertex-anthropic"})


def _cache_inside(info: dict[str, Any]) -> bool:
    """Whether this assistant message's `tokens.input` holds its cached tokens: an OpenAI-style
    provider (not one served through the Anthropic SDK: those providers, or a Claude model)
    before the change above, dated by the message's `time.created`."""
    created = obj(info.get("time")).get("created")
    return (isinstance(created, (int, float)) and created < CACHE_INSIDE_UNTIL_MS
            and str(info.get("providerID")) not in ANTHROPIC_PROVIDERS
            and "claude" not in str(info.get("modelID")).lower())


def _recorded(tokens: Any, cache_inside: bool = False) -> dict[str, Any] | None:
    """A step's usage: `total_input` = `input + cache.read + cache.write`, or `input` alone
    when it holds the cache (`cache_inside`, and the cache no larger than it)."""
    if not isinstance(tokens, dict) or not isinstance(tokens.get("input"), int):
        return None
    cache = obj(tokens.get("cache"))
    read = cache.get("read") if isinstance(cache.get("read"), int) else None
    write = cache.get("write") if isinstance(cache.get("write"), int) else None
    cached = (read or 0) + (write or 0)
    inside = cache_inside and cached <= tokens["input"]
    return {"total_input": tokens["input"] if inside else tokens["input"] + cached,
            "input": tokens["input"] - cached if inside else tokens["input"],
            "cache_read": read, "cache_write": write,
            "output": tokens.get("output") if isinstance(tokens.get("output"), int) else None,
            "reasoning": tokens.get("reasoning") if isinstance(tokens.get("reasoning"), int)
            else None}


def _user(history: HistoryBuilder, info: dict[str, Any], parts: list[dict[str, Any]]) -> None:
    texts, media = [], []
    meta: dict[str, Any] = {"message_id": info.get("id")}
    for part in parts:
        kind = part.get("type")
        if kind == "text" and isinstance(part.get("text"), str) and not part.get("ignored"):
            texts.append(part["text"])
        elif kind == "file" and isinstance(part.get("url"), str):
            media.append(data_url_part("image" if str(part.get("mime", "")).startswith("image/")
                                       else "file", part["url"], filename=part.get("filename")))
        elif kind == "compaction":
            meta["opencode_compaction_request"] = {"auto": part.get("auto"),
                                                   "overflow": part.get("overflow")}
    if "opencode_compaction_request" in meta and not texts:
        texts.append(COMPACTION_PROMPT)
    if media:
        meta["binary_parts"] = media
    history.add(Message.of("user", "\n".join(texts), meta=meta))


def _assistant(history: HistoryBuilder, info: dict[str, Any], parts: list[dict[str, Any]],
               where: str, state: dict[str, Any]) -> None:
    base: dict[str, Any] = {"message_id": info.get("id")}
    cache_inside = _cache_inside(info)  # the message's steps share its provider and date
    for key, out in (("modelID", "model"), ("mode", "mode"), ("agent", "agent")):
        if isinstance(info.get(key), str):
            base[out] = info[key]
    if info.get("summary") is True:
        request = state.pop("request", None)
        base["compaction"] = {"source": "opencode", "kind": "summary",
                              "trigger": "auto" if request and request.get("auto") else "manual",
                              "pre_tokens": state.get("last_input"), "summary_present": True}
        base["compact_summary"] = True
    steps: list[list[dict[str, Any]]] = [[]]
    for part in parts:
        if part.get("type") == "step-start" and steps[-1]:
            steps.append([])
        steps[-1].append(part)
    has_steps = any(p.get("type") == "step-finish" for p in parts)
    for number, step in enumerate(steps):
        meta: dict[str, Any] = dict(base) if number == 0 else {"message_id": info.get("id"),
                                                              "step": number}
        history.close()
        draft = history.assistant(None, meta)
        results: list[Message] = []
        for part in step:
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                draft.texts.append(part["text"])
            elif kind == "step-finish" and (
                    recorded := _recorded(part.get("tokens"), cache_inside)):
                meta["recorded"] = recorded
            elif kind == "tool":
                tool_state = expect_dict(part.get("state"), f"{where} part {part.get('id')}.state")
                call_id = str(part.get("callID") or part.get("id") or "")
                draft.add_call(ToolCall(call_id, str(part.get("tool") or ""),
                                        compact_json(tool_state.get("input", {}))))
                status = tool_state.get("status")
                if status not in ("completed", "error"):
                    continue
                tool_meta: dict[str, Any] = {"part_id": part.get("id")}
                times = obj(tool_state.get("time"))
                if times.get("compacted"):
                    tool_meta["opencode_pruned"] = times["compacted"]
                text = tool_state.get("output" if status == "completed" else "error")
                results.append(Message.of("tool", text if isinstance(text, str) else
                                          compact_json(text), tool_call_id=call_id,
                                          is_error=status == "error", meta=tool_meta))
        if not has_steps and "recorded" not in meta and (
                recorded := _recorded(info.get("tokens"), cache_inside)):
            meta["recorded"] = recorded
        if "recorded" in meta:
            state["last_input"] = meta["recorded"]["total_input"]
        for result in results:
            history.add(result)
        history.close()


def _system_prompt(messages: list[tuple[dict[str, Any], list[Any]]]) -> list[str]:
    """The system prompt as OpenCode sent it, where its releases recorded it: the first
    assistant message's `system` (a list of texts, each a system message; 2025 releases)."""
    for info, _ in messages:
        system = info.get("system") if info.get("role") == "assistant" else None
        if isinstance(system, list) and system and all(isinstance(t, str) for t in system):
            return list(system)
        if isinstance(system, str) and system:
            return [system]
    return []


def _session(info: dict[str, Any], messages: list[tuple[dict[str, Any], list[Any]]]) -> Session:
    history = HistoryBuilder()
    state: dict[str, Any] = {}
    session_id = str(info.get("id") or "")
    for text in _system_prompt(messages):
        history.add(Message.of("system", text, meta={"source": "system_prompt"}))
    for info_m, parts in messages:
        where = f"{LABEL} message {info_m.get('id')}"
        parts = [expect_dict(p, f"{where} part") for p in expect_list(parts, f"{where} parts")]
        role = info_m.get("role")
        if role == "user":
            _user(history, info_m, parts)
            if any(p.get("type") == "compaction" for p in parts):
                state["request"] = next(p for p in parts if p.get("type") == "compaction")
        elif role == "assistant":
            _assistant(history, info_m, parts, where, state)
        else:
            raise TranscriptError(f"{where}: `role` should be user or assistant, not {role!r}")
    result = history.messages()
    require_sessions(list(result), f"{LABEL} session {session_id} has no messages")
    meta: dict[str, Any] = {"session_id": session_id}
    created: list[float] = [c for i, _ in messages
                            if isinstance(c := obj(i.get("time")).get("created"), (int, float))]
    if created:
        meta.update(started=iso_from_ms(min(created)), ended=iso_from_ms(max(created)))
    if isinstance(info.get("version"), str):
        meta["agent_version"] = info["version"]
    for key in ("directory", "projectID"):
        if isinstance(info.get(key), str):
            meta[key] = info[key]
    models = [m.meta["model"] for m in result if isinstance(m.meta.get("model"), str)]
    if models:
        meta["model"] = models[0]
    pruned = sum(1 for m in result if m.meta.get("opencode_pruned"))
    if pruned:
        meta["opencode_pruned"] = pruned
    title = info.get("title") if isinstance(info.get("title"), str) and info["title"] else None
    parent = info.get("parentID") if isinstance(info.get("parentID"), str) else None
    return Session(format=NAME, title=title or title_from(result, f"{LABEL} session"),
                   messages=result, key=session_id, parent_key=parent,
                   meta=with_recorded_compactions(meta, result))


def parse(source: Source) -> list[Session]:
    if source.archive == "sqlite":
        stored = _from_database(source)
    elif source.archive:
        with Archive(source) as archive:
            stored = _from_storage(archive)
    else:
        document = source.document()
        if not _is_export(document):
            raise TranscriptError(f"an {LABEL} export should be an object with `info` (a "
                                  f"session) and `messages`, not {type_name(document)}")
        exported = []
        for n, item in enumerate(document["messages"]):
            item = expect_dict(item, f"messages[{n}]")
            exported.append((expect_dict(item.get("info"), f"messages[{n}].info"),
                             expect_list(item.get("parts", []), f"messages[{n}].parts")))
        stored = [(document["info"], exported)]
    sessions = [_session(info, messages) for info, messages in stored if messages]
    return require_sessions(sessions, f"no {LABEL} session with messages")
