"""SWE-agent trajectories (`.traj`): `{environment, trajectory, history, info}`.

Counts come from `trajectory[]` (SPEC §7): each step with an action is an assistant message
with one call and its observation (even empty) is the result. Text-acting runs get synthetic
calls `swe-agent-<n>` named by the command (the action's first word) with the action text as
arguments; function-calling runs use the native call of the matching history message. The
history before the first assistant message (system prompt, demonstrations, the task) leads
the session; demonstrations are tagged, not parsed.
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
LINE_BASED = False


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if isinstance(document, dict) and isinstance(document.get("trajectory"), list) and (
        "history" in document or "info" in document
    ):
        return True
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
        tool_calls = message.get("tool_calls")
        if not tool_calls or not isinstance(tool_calls, list):
            continue
        call = expect_dict(tool_calls[0], f"history[{index}].tool_calls[0]")
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        calls.append(ToolCall(
            str(call.get("id") or ""),
            str(function.get("name") or ""),
            arguments_text(function.get("arguments")),
            str(call.get("type") or "function"),
        ))
    return calls


def parse(source: Source) -> list[Session]:
    document = source.document()
    if not isinstance(document, dict):
        raise TranscriptError(f"a .traj file should be a JSON object, not {type_name(document)}")
    trajectory = expect_list(document.get("trajectory"), "trajectory")
    history = document.get("history") or []
    history = expect_list(history, "history")
    messages: list[Message] = []
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
        if calls < len(native):
            call = native[calls]
        else:
            command = action.split(None, 1)[0] if action.strip() else ""
            call = ToolCall(f"{NAME}-{calls + 1}", command, compact_json({"action": action}))
        calls += 1
        messages.append(Message.of("assistant", response, tool_calls=[call], meta=meta))
        messages.append(Message.of(
            "tool", observation, tool_call_id=call.id, meta={"step": index}
        ))

    info = document.get("info") if isinstance(document.get("info"), dict) else {}
    session_meta: dict[str, Any] = {
        key: info[key]
        for key in ("exit_status", "model_stats", "swe_agent_version", "swe_agent_hash")
        if key in info
    }
    if isinstance(document.get("environment"), str):
        session_meta["environment"] = document["environment"]
    require_sessions(messages, "the trajectory has no history and no steps")
    return [Session(
        format=NAME,
        title=title_from(messages, "SWE-agent trajectory"),
        messages=tuple(messages),
        meta=session_meta,
    )]
