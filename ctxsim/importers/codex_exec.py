"""`codex exec --json` streams (stdout JSONL: `thread.started`, `turn.*`, `item.*`), alone or
uploaded with the rollout `codex exec` also writes (`~/.codex/sessions/…/rollout-*.jsonl`),
both in one archive (or loose files the upload page packs into one).

With its rollout (matched by `session_meta.id` = `thread_id`; a lone stream and a lone rollout
also pair up) the session is the rollout's, imported as `codex` does: the rollout has what the
stream lacks — the prompt, the system and developer messages, per-call usage
(`last_token_usage`), compactions and `cli_version`. The stream's figures are kept beside it.

The stream alone (SPEC-agents-2 §7): one item holds a call and its output. Calls are
`command_execution` (`{"command"}`), `file_change` (`{"changes"}`), `mcp_tool_call`
(`server__tool`, its `arguments`), `web_search`, `todo_list` (Codex's `update_plan`) and
`collab_tool_call`; each gets a `tool` message (`aggregated_output`, the MCP result or error;
`is_error` for a non-zero exit or status failed/declined). Model calls are inferred: a
reasoning, message or call item that follows a finished call starts a new assistant message;
calls started while another is still running are parallel calls of one response. The prompt
is not in the stream: each turn starts with an empty user message marked
`meta.prompt_not_recorded`. `turn.completed.usage` is the thread's running total, not a
call's: it is kept as `meta.turn_usage` (and the last as `meta.thread_usage`), never as
per-call usage. `error` items and events are kept as warnings.
"""

from __future__ import annotations

import io
import json
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from . import codex
from .archive import Archive, archive_verdict, jsonl_member
from .common import (
    AssistantDraft,
    HistoryBuilder,
    compact_json,
    items,
    obj,
    require_sessions,
    title_from,
)
from .errors import Near, TranscriptError, type_name
from .source import Probe, Source

NAME = "codex-exec"
ACCEPTS_ARCHIVE = True
EVENTS = ("thread.started", "turn.started", "turn.completed", "turn.failed", "item.started",
          "item.updated", "item.completed", "error")
CALL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search", "todo_list",
              "collab_tool_call")


def _is_stream_line(record: Any) -> bool:
    return isinstance(record, dict) and record.get("type") in EVENTS


def detect(probe: Probe) -> bool | str:
    if probe.source.archive:
        return archive_verdict(probe, _streams, "the archive has no `codex exec --json` stream "
                                                "(.jsonl from thread.started)")
    first = probe.first_record
    if _is_stream_line(first) and first.get("type") in ("thread.started", "turn.started"):
        return True
    if any(_is_stream_line(r) and str(r["type"]).startswith("item.") for r in probe.records):
        return Near("item events are there but the stream does not start with "
                    "`thread.started`", 2)
    return "the first line is not a `thread.started` event"


# Streams are looked for among the archive's first few text files only: an archive of another
# format (OpenCode's storage holds thousands of JSON files) must not be opened file by file.
MAX_CANDIDATES = 50


def _candidates(archive: Archive, suffixes: tuple[str, ...]) -> list[str]:
    return [n for n in archive.names if n.endswith(suffixes)][:MAX_CANDIDATES]


def _streams(archive: Archive) -> list[str]:
    return [n for n in _candidates(archive, (".jsonl", ".json", ".txt", ".log"))
            if b'"thread.started"' in archive.head(n, 400)]


def _rollouts(archive: Archive) -> list[str]:
    return [n for n in _candidates(archive, (".jsonl",))
            if b'"session_meta"' in archive.head(n, 400)]


def _output(item: dict[str, Any]) -> tuple[str, bool]:
    kind = item.get("type")
    status = item.get("status")
    failed = status in ("failed", "declined")
    if kind == "command_execution":
        code = item.get("exit_code")
        return _str(item.get("aggregated_output")), failed or (isinstance(code, int) and code != 0)
    if kind == "mcp_tool_call":
        if isinstance(item.get("error"), dict):
            return _str(item["error"].get("message")), True
        result = item.get("result")
        if isinstance(result, dict):
            return compact_json(result.get("content", result)), failed
        return _str(result), failed
    if kind == "file_change":
        lines = [f"{c.get('kind', '')} {c.get('path', '')}" for c in items(item.get("changes"))
                 if isinstance(c, dict)]
        return "\n".join([str(status or ""), *lines]).strip(), failed
    if kind == "todo_list":
        return "Plan updated", failed
    return _str(status), failed


def _arguments(item: dict[str, Any]) -> tuple[str, str]:
    kind = str(item.get("type"))
    if kind == "command_execution":
        return "command_execution", compact_json({"command": item.get("command")})
    if kind == "mcp_tool_call":
        return f"{item.get('server', '')}__{item.get('tool', '')}", compact_json(
            item.get("arguments") if item.get("arguments") is not None else {})
    fields = {k: v for k, v in item.items() if k not in ("id", "type", "status",
                                                       "aggregated_output", "result")}
    return kind, compact_json(fields)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else compact_json(value)


def _response(history: HistoryBuilder, line: int, *, new: bool) -> AssistantDraft:
    """The assistant message (one inferred model call) an item belongs to: the open one, or a
    new one when `new` (the item follows a finished call) or none is open."""
    if new or history.open_assistant is None:
        history.close()
        return history.assistant(("exec", line), {"source_line": line})
    return history.open_assistant


def _stream_session(records: list[tuple[int, Any]], origin: str) -> Session:
    history = HistoryBuilder()
    thread_id = ""
    turn_usage: list[Any] = []
    warnings: list[str] = []
    running: set[str] = set()
    after_result = True  # a new assistant message starts at the next model item
    calls = 0
    failure = ""  # the last `turn.failed` / `error` message
    for line, record in records:
        if not isinstance(record, dict):
            raise TranscriptError(f"{origin}each line should be a JSON object, "
                                  f"not {type_name(record)}", line=line)
        kind = record.get("type")
        if kind == "thread.started":
            thread_id = str(record.get("thread_id") or "")
        elif kind == "turn.started":
            history.add(Message.of("user", "", meta={"source_line": line,
                                                      "prompt_not_recorded": True}))
            after_result = True
        elif kind == "turn.completed":
            turn_usage.append(record.get("usage"))
        elif kind in ("turn.failed", "error"):
            detail = obj(record.get("error")) or record
            failure = _str(detail.get("message"))
            warnings.append(f"line {line}: {kind}: {failure}")
        elif kind in ("item.started", "item.completed"):
            item = record.get("item")
            if not isinstance(item, dict):
                raise TranscriptError(f"{origin}`item` should be an object, not "
                                      f"{type_name(item)}", line=line)
            item_id, item_type = str(item.get("id", "")), item.get("type")
            if item_type == "error":
                if kind == "item.completed":
                    warnings.append(f"line {line}: {_str(item.get('message'))}")
                continue
            if kind == "item.started":
                if item_type in CALL_ITEMS:
                    if after_result and not running:
                        history.close()
                        history.assistant(("exec", line), {"source_line": line})
                        after_result = False
                    running.add(item_id)
                continue
            if item_type in CALL_ITEMS:
                draft = _response(history, line, new=item_id not in running and after_result)
                running.discard(item_id)
                calls += 1
                call_id = f"{NAME}-{calls}"
                name, arguments = _arguments(item)
                draft.add_call(ToolCall(call_id, name, arguments))
                output, error = _output(item)
                history.add(Message.of(
                    "tool", output, tool_call_id=call_id, is_error=error,
                    meta={"source_line": line, "item_id": item_id, "item_type": item_type}))
                after_result = True
            elif item_type in ("agent_message", "reasoning"):
                draft = _response(history, line, new=after_result)
                after_result = False
                if item_type == "agent_message":
                    draft.texts.append(_str(item.get("text")))
                else:
                    draft.meta.setdefault("reasoning_summary", []).append(_str(item.get("text")))
    messages = history.messages()
    if not any(m.role != "user" for m in messages):
        if failure:
            require_sessions([], f"{origin}the run failed before the model answered: "
                                 f"{_api_error(failure)}")
        require_sessions([], f"{origin}the stream has no items (was `codex exec` stopped "
                             "before the model answered?)")
    meta: dict[str, Any] = {"thread_id": thread_id, "turn_usage": turn_usage}
    if turn_usage:
        meta["thread_usage"] = turn_usage[-1]
    return Session(format=NAME, title=title_from(messages, "codex exec run"),
                   messages=messages, key=thread_id, meta=meta, warnings=tuple(warnings))


def _api_error(message: str) -> str:
    """A failure's message, shortened: the API's error text when the message is the API's
    JSON error body (`{"error": {"message": …}}`, as codex 0.130 reports a 400)."""
    try:
        body = json.loads(message)
    except ValueError:
        body = None
    inner = obj(obj(body).get("error")).get("message")
    text = inner if isinstance(inner, str) else message
    return text if len(text) <= 300 else text[:299] + "…"


def _with_rollout(stream: Session, rollout: Session) -> Session:
    meta = dict(rollout.meta)
    meta.update({k: stream.meta[k] for k in ("thread_id", "turn_usage", "thread_usage")
                 if k in stream.meta})
    meta["exec_stream"] = {"tool_calls": stream.tool_call_count,
                           "tool_results": stream.tool_result_count}
    return Session(format=NAME, title=rollout.title, messages=rollout.messages,
                   tools=rollout.tools, key=rollout.key or stream.key, meta=meta,
                   warnings=stream.warnings + rollout.warnings)


def _rollout_session(archive: Archive, name: str) -> Session:
    data = archive.read(name)
    try:
        return codex.parse(Source(io.BytesIO(data), max_bytes=len(data) + 1))[0]
    except TranscriptError as error:
        raise TranscriptError(f"{name}: {error}") from None


def parse(source: Source) -> list[Session]:
    if not source.archive:
        return [_stream_session(list(source.records()), "")]
    with Archive(source) as archive:
        streams = {n: _stream_session(jsonl_member(archive, n), f"{n}: ")
                   for n in _streams(archive)}
        rollouts = {n: _rollout_session(archive, n) for n in _rollouts(archive)}
    by_id = {s.key: n for n, s in rollouts.items()}
    sessions: list[Session] = []
    used: set[str] = set()
    for stream in streams.values():
        match = by_id.get(stream.key)
        if match is None and len(streams) == 1 and len(rollouts) == 1:
            match = next(iter(rollouts))
        if match is not None and match not in used:
            used.add(match)
            sessions.append(_with_rollout(stream, rollouts[match]))
        else:
            sessions.append(stream)
    for name, rollout in rollouts.items():
        if name not in used:
            sessions.append(Session(format=NAME, title=rollout.title, messages=rollout.messages,
                                    key=rollout.key, meta=dict(rollout.meta),
                                    warnings=rollout.warnings))
    return require_sessions(sessions, "the archive has no exec stream")
