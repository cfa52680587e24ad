"""ChatCLI saved sessions (`~/.chatcli/sessions/<name>.json`).

Version 2 is `{version: 2, title, chat_history, agent_history?, coder_history?,
shared_memory?}`: each history is its own conversation, hence its own session (SPEC §7).
The legacy form is a bare array of messages. Calls carry a flat `name` and `arguments` as an
object (serialized compactly); `meta.agent_feedback` marks worker results sent as user
messages. Encrypted sessions are refused when the file is opened.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .common import (
    Names,
    arguments_text,
    binary_part,
    expect_dict,
    expect_list,
    optional_str,
    require_sessions,
)
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "chatcli"

HISTORIES = ("chat_history", "agent_history", "coder_history", "shared_memory")
ROLES = Names({"system", "user", "assistant", "tool"})
CHATCLI_ONLY_KEYS = Names({"meta", "images", "system_parts", "error_code"})


def _looks_like_legacy(document: Any) -> bool:
    if not isinstance(document, list) or not document:
        return False
    if not all(isinstance(item, dict) and item.get("role") in ROLES for item in document):
        return False
    for item in document:
        if CHATCLI_ONLY_KEYS & set(item):
            return True
        calls = item.get("tool_calls")
        if isinstance(calls, list) and any(
            isinstance(call, dict) and "name" in call and "function" not in call
            for call in calls
        ):
            return True
    return False


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if isinstance(document, dict) and any(
        isinstance(document.get(key), list) for key in HISTORIES[:3]
    ):
        return True
    if _looks_like_legacy(document):
        return True
    return "no `chat_history` (v2) and no array of ChatCLI messages (legacy)"


def _message(item: Any, where: str) -> Message:
    item = expect_dict(item, where)
    role = item.get("role")
    if role not in ROLES:
        raise TranscriptError(
            f"`{where}.role` should be system, user, assistant or tool, not {role!r}"
        )
    content = item.get("content")
    if content is not None and not isinstance(content, str):
        raise TranscriptError(
            f"`{where}.content` should be a string, not {type_name(content)}"
        )
    calls = []
    for index, call in enumerate(expect_list(item.get("tool_calls") or [], f"{where}.tool_calls")):
        call_where = f"{where}.tool_calls[{index}]"
        call = expect_dict(call, call_where)
        calls.append(ToolCall(
            optional_str(call.get("id"), f"{call_where}.id"),
            optional_str(call.get("name"), f"{call_where}.name"),
            arguments_text(call.get("arguments")),
            optional_str(call.get("type"), f"{call_where}.type") or "function",
        ))
    meta: dict[str, Any] = {"message_index": int(where.rsplit("[", 1)[1][:-1])}
    source_meta = item.get("meta") if isinstance(item.get("meta"), dict) else {}
    for key in ("is_summary", "summary_of", "mode", "preserve_verbatim", "skill_names"):
        if key in source_meta:
            meta[key] = source_meta[key]
    images = item.get("images")
    if isinstance(images, list) and images:
        meta["binary_parts"] = [
            binary_part("image", image.get("media_type", ""), image.get("data"),
                        url=image.get("url") or None, file_name=image.get("file_name") or None)
            for image in images if isinstance(image, dict)
        ]
    if isinstance(item.get("system_parts"), list):
        meta["system_parts"] = item["system_parts"]
    return Message.of(
        role,
        content or "",
        tool_calls=calls,
        tool_call_id=optional_str(item.get("tool_call_id"), f"{where}.tool_call_id"),
        is_error=item.get("is_error") is True,
        error_code=optional_str(item.get("error_code"), f"{where}.error_code"),
        agent_feedback=source_meta.get("agent_feedback") is True,
        meta=meta,
    )


def _title(messages: tuple[Message, ...], fallback: str) -> str:
    for message in messages:
        if message.role == "user" and message.content:
            first = message.text.strip().splitlines()
            if first:
                return first[0][:80]
    return fallback


def parse(source: Source) -> list[Session]:
    document = source.document()
    sessions = []
    if isinstance(document, list):
        messages = tuple(_message(item, f"[{index}]") for index, item in enumerate(document))
        sessions.append(Session(
            format=NAME, title=_title(messages, "ChatCLI session"), messages=messages,
            key="chat", meta={"version": 1},
        ))
    elif isinstance(document, dict):
        title = document.get("title") if isinstance(document.get("title"), str) else ""
        for key in HISTORIES:
            history = document.get(key)
            if history is None:
                continue
            history = expect_list(history, key)
            if not history:
                continue
            if key == "shared_memory" and not all(
                isinstance(item, dict) and "role" in item for item in history
            ):
                continue  # shared notes, not a conversation
            messages = tuple(
                _message(item, f"{key}[{index}]") for index, item in enumerate(history)
            )
            mode = key.removesuffix("_history")
            sessions.append(Session(
                format=NAME,
                title=f"{title} ({mode})" if title else _title(messages, f"ChatCLI {mode}"),
                messages=messages, key=mode,
                meta={"version": document.get("version"), "mode": mode},
            ))
    else:
        raise TranscriptError(
            f"a ChatCLI session should be an object or a list, not {type_name(document)}"
        )
    return require_sessions(sessions, "the ChatCLI session has no messages")
