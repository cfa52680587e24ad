"""SWE-agent trajectories (`.traj`): `{environment, trajectory, history, info}`.

Counts come from `trajectory[]` (SPEC §7): each step with an action is an assistant message
with one call and its observation (even empty) is the result. Text-acting runs get synthetic
calls `swe-agent-<n>` named by the command (the action's first word) with the action text as
arguments; function-calling runs use the native call of the matching history message. The
history before the first assistant message (system prompt, demonstrations, the task) leads
the session; demonstrations are tagged, not parsed.

Demonstration files (`trajectories/demonstrations/*.traj`, what SWE-agent 1.x loads as demos)
may hold only `history`. Without a `trajectory` the history is the session: native
`tool_calls` are used as they are and each `tool` message (`tool_call_ids`, plural) is a
result; a text action (`action` on an assistant message) is a synthetic call answered by the
next user observation.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .common import (
    arguments_text,
    compact_json,
    expect_dict,
    expect_list,
    require_sessions,
    title_from,
)
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "swe-agent"


HISTORY_KEYS = ("message_type", "agent", "tool_call_ids", "is_demo")


def _is_agent_history(history: Any) -> bool:
    """A list of SWE-agent history messages: `role` plus SWE-agent's own keys."""
    items = [item for item in history if isinstance(item, dict)] if isinstance(
        history, list) else []
    return bool(items) and all("role" in item for item in items) and any(
        key in item for item in items for key in HISTORY_KEYS
    )


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if not isinstance(document, dict):
        return "no `trajectory` list with `history`/`info`"
    if isinstance(document.get("trajectory"), list) and (
        "history" in document or "info" in document
    ):
        return True
    if "trajectory" not in document and "messages" not in document and _is_agent_history(
        document.get("history")
    ):
        return True  # a demonstration: history only
    return "no `trajectory` list with `history`/`info`"


def _text(content: Any, field: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) and isinstance(part.get("text"), str)
            else part if isinstance(part, str) else ""
            for part in content
        )
    raise TranscriptError(
        f"`{field}` should be a string or a list of text parts, not {type_name(content)}"
    )


def _native_calls(history: list[Any]) -> list[ToolCall]:
    """The first native call of each history assistant message that has any."""
    calls = []
    for index, message in enumerate(history):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if _is_demo(message):
            continue  # demonstration steps put in the history are not this run's calls
        tool_calls = message.get("tool_calls")
        if not tool_calls or not isinstance(tool_calls, list):
            continue
        calls.append(_call(tool_calls[0], f"history[{index}].tool_calls[0]"))
    return calls


def _is_demo(item: dict[str, Any]) -> bool:
    return item.get("is_demo") in (True, "True", "true")


def _call(call: Any, field: str) -> ToolCall:
    call = expect_dict(call, field)
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    return ToolCall(
        str(call.get("id") or ""),
        str(function.get("name") or ""),
        arguments_text(function.get("arguments")),
        str(call.get("type") or "function"),
    )


def _synthetic_call(action: str, number: int) -> ToolCall:
    command = action.split(None, 1)[0] if action.strip() else ""
    return ToolCall(f"{NAME}-{number}", command, compact_json({"action": action}))


def _history_messages(history: list[Any]) -> list[Message]:
    """A trajectory-less file: the history itself, calls native or synthetic."""
    messages: list[Message] = []
    synthetic = 0
    waiting: list[str] = []  # calls of the last assistant message not answered yet
    text_call: str | None = None  # a text action waiting for its observation
    for index, item in enumerate(history):
        where = f"history[{index}]"
        item = expect_dict(item, where)
        role = item.get("role")
        text = _text(item.get("content"), f"{where}.content")
        meta: dict[str, Any] = {"history_index": index}
        demo = _is_demo(item)
        if demo:
            meta.update(demonstration=True, injected=True)
        if role == "system":
            meta["source"] = "system_prompt"
            messages.append(Message.of("system", text, meta=meta))
        elif role == "assistant":
            native = item.get("tool_calls")
            action = item.get("action")
            calls: list[ToolCall] = []
            if isinstance(native, list) and native and not demo:
                calls = [
                    _call(call, f"{where}.tool_calls[{number}]")
                    for number, call in enumerate(native)
                ]
            elif isinstance(action, str) and action.strip() and not demo:
                synthetic += 1
                calls = [_synthetic_call(action, synthetic)]
            waiting = [call.id for call in calls]
            text_call = calls[0].id if calls and not isinstance(native, list) else None
            messages.append(Message.of("assistant", text, tool_calls=calls, meta=meta))
        elif role == "tool":
            ids = item.get("tool_call_ids")
            ids = [str(i) for i in ids if i] if isinstance(ids, list) else []
            if not ids and isinstance(item.get("tool_call_id"), str):
                ids = [item["tool_call_id"]]
            call_id = ids[0] if ids else (waiting[0] if waiting else "")
            if len(ids) > 1:
                meta["tool_call_ids"] = ids
            waiting = [i for i in waiting if i not in (ids or [call_id])]
            messages.append(Message.of("tool", text, tool_call_id=call_id, meta=meta))
            text_call = None
        elif role == "user":
            if text_call is not None and not demo:
                messages.append(Message.of("tool", text, tool_call_id=text_call, meta=meta))
                text_call = None
                waiting = []
            else:
                messages.append(Message.of("user", text, meta=meta))
    return messages


def parse(source: Source) -> list[Session]:
    document = source.document()
    if not isinstance(document, dict):
        raise TranscriptError(f"a .traj file should be a JSON object, not {type_name(document)}")
    history = document.get("history") or []
    history = expect_list(history, "history")
    if "trajectory" not in document and history:
        messages = _history_messages(history)
        require_sessions(messages, "the trajectory has no history and no steps")
        return [Session(
            format=NAME,
            title=title_from(messages, "SWE-agent trajectory"),
            messages=tuple(messages),
            meta=_session_meta(document),
        )]
    trajectory = expect_list(document.get("trajectory"), "trajectory")
    messages = []
    for index, item in enumerate(history):
        item = expect_dict(item, f"history[{index}]")
        role = item.get("role")
        if role == "assistant":
            break
        if role not in ("system", "user", "tool"):
            continue
        meta: dict[str, Any] = {"history_index": index}
        if item.get("is_demo") in (True, "True", "true"):
            meta.update(demonstration=True, injected=True)
        if role == "system":
            meta["source"] = "system_prompt"
        messages.append(Message.of(
            "system" if role == "system" else "user",
            _text(item.get("content"), f"history[{index}].content"),
            meta=meta,
        ))

    native = _native_calls(history)
    calls = 0
    for index, step in enumerate(trajectory):
        step = expect_dict(step, f"trajectory[{index}]")
        action = step.get("action")
        response = step.get("response")
        if not isinstance(response, str):
            response = step.get("thought") if isinstance(step.get("thought"), str) else ""
        meta = {"step": index}
        if isinstance(step.get("execution_time"), (int, float)):
            meta["execution_time"] = step["execution_time"]
        observation = _text(step.get("observation"), f"trajectory[{index}].observation")
        if not isinstance(action, str) or not action:
            messages.append(Message.of("assistant", response, meta=meta))
            if observation:
                messages.append(Message.of("user", observation, meta={"step": index}))
            continue
        call = native[calls] if calls < len(native) else _synthetic_call(action, calls + 1)
        calls += 1
        messages.append(Message.of("assistant", response, tool_calls=[call], meta=meta))
        messages.append(Message.of(
            "tool", observation, tool_call_id=call.id, meta={"step": index}
        ))

    require_sessions(messages, "the trajectory has no history and no steps")
    return [Session(
        format=NAME,
        title=title_from(messages, "SWE-agent trajectory"),
        messages=tuple(messages),
        meta=_session_meta(document),
    )]


def _session_meta(document: dict[str, Any]) -> dict[str, Any]:
    info = document.get("info")
    info = info if isinstance(info, dict) else {}
    session_meta: dict[str, Any] = {
        key: info[key]
        for key in ("exit_status", "model_stats", "swe_agent_version", "swe_agent_hash")
        if key in info
    }
    if isinstance(document.get("environment"), str):
        session_meta["environment"] = document["environment"]
    return session_meta
