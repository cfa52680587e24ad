"""OpenAI Chat Completions: a request body `{model, messages, tools?, response_format?}`, a
bare messages array, or JSON Lines of bodies (fine-tuning files: one conversation per line).

A log that keeps the response beside the request (`{..., "response": {chat.completion}}`,
LiteLLM-style `{"request": {...}, "response": {...}}`, batch output's `response.body`) imports
the response's assistant message too, with the response's usage as its recorded usage
(SPEC §11).

`developer` messages are system messages. A legacy `function_call` (no id) gets a synthetic
call `openai-chat-<n>`, and the following `function` message answers it.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.pipeline.usage import openai_recorded

from .common import (
    Names,
    arguments_text,
    binary_part,
    data_url_part,
    expect_dict,
    expect_list,
    optional_str,
    require_sessions,
    title_from,
)
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "openai-chat"

ROLES = Names({"system", "developer", "user", "assistant", "tool", "function"})


def is_message_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, dict) and item.get("role") in ROLES for item in value)
    )


def detect(probe: Probe) -> bool | str:
    if probe.is_jsonl:
        first = probe.first_record
        if isinstance(first, dict) and isinstance(_request(first).get("messages"), list):
            return True
        return "JSON Lines whose first line has no `messages` list"
    document = probe.document()
    if isinstance(document, dict):
        document = _request(document)
        if is_message_list(document.get("messages")) or document.get("messages") == []:
            return True
        return "no `messages` list of chat messages"
    if is_message_list(document):
        return True
    return "not a messages array or a body with `messages`"


def _request(body: dict[str, Any]) -> dict[str, Any]:
    """The request of a LiteLLM-style `{request, response}` log, else the body itself."""
    request = body.get("request")
    if "messages" not in body and isinstance(request, dict) and "messages" in request:
        return request
    return body


def _completion(response: Any) -> dict[str, Any] | None:
    """A chat.completion object, also when wrapped as batch output's `response.body`."""
    if isinstance(response, dict) and not isinstance(response.get("choices"), list):
        response = response.get("body")
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        return response
    return None


def response_message(response: dict[str, Any], line: int | None) -> Message | None:
    """The assistant message of a logged response, carrying the response's usage."""
    choices = response["choices"]
    if not choices:
        return None
    choice = expect_dict(choices[0], "response.choices[0]", line)
    item = expect_dict(choice.get("message"), "response.choices[0].message", line)
    mapped = map_messages([dict(item, role="assistant")], "response.choices", line)[0]
    meta: dict[str, Any] = {"source": "response"}
    if response.get("usage") is not None:
        meta["usage"] = response["usage"]
        recorded = openai_recorded(response["usage"])
        if recorded is not None:
            meta["recorded"] = recorded
    if mapped.meta.get("reasoning"):
        meta["reasoning"] = mapped.meta["reasoning"]
    return Message.of("assistant", mapped.content, tool_calls=mapped.tool_calls, meta=meta)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_text(content: Any, field: str, line: int | None = None
                 ) -> tuple[str, list[dict[str, Any]]]:
    """`content`: a string, null, or parts (text joined with no separator)."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(expect_list(content, field, line)):
        where = f"{field}[{index}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        part = expect_dict(part, where, line)
        kind = part.get("type")
        if kind == "text":
            texts.append(optional_str(part.get("text"), f"{where}.text", line))
        elif kind == "refusal":
            texts.append(optional_str(part.get("refusal"), f"{where}.refusal", line))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, dict) else image
            detail = image.get("detail") if isinstance(image, dict) else None
            parts.append(data_url_part(
                "image", url if isinstance(url, str) else "",
                detail=detail if isinstance(detail, str) else None,
            ))
        elif kind == "input_audio":
            audio = _object(part.get("input_audio"))
            parts.append(binary_part("audio", str(audio.get("format", "")), audio.get("data")))
        elif kind == "file":
            file = _object(part.get("file"))
            parts.append(binary_part(
                "file", "", file.get("file_data"), filename=file.get("filename"),
                file_id=file.get("file_id"),
            ))
    return "".join(texts), parts


def map_messages(items: list[Any], field: str, line: int | None = None) -> list[Message]:
    messages: list[Message] = []
    legacy_calls = 0
    unanswered_legacy: list[str] = []
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        item = expect_dict(item, where, line)
        role = item.get("role")
        if role not in ROLES:
            raise TranscriptError(
                f"`{where}.role` should be one of {', '.join(sorted(ROLES))}, not {role!r}",
                line=line,
            )
        text, parts = content_text(item.get("content"), f"{where}.content", line)
        meta: dict[str, Any] = {"message_index": index}
        if parts:
            meta["binary_parts"] = parts
        name = optional_str(item.get("name"), f"{where}.name", line)
        if role in ("system", "developer"):
            if role == "developer":
                meta["source_role"] = "developer"
            messages.append(Message.of("system", text, name=name, meta=meta))
        elif role == "user":
            messages.append(Message.of("user", text, name=name, meta=meta))
        elif role == "assistant":
            calls = []
            for call_index, call in enumerate(
                expect_list(item.get("tool_calls") or [], f"{where}.tool_calls", line)
            ):
                call_where = f"{where}.tool_calls[{call_index}]"
                call = expect_dict(call, call_where, line)
                function = expect_dict(call.get("function"), f"{call_where}.function", line)
                calls.append(ToolCall(
                    optional_str(call.get("id"), f"{call_where}.id", line),
                    optional_str(function.get("name"), f"{call_where}.function.name", line),
                    arguments_text(function.get("arguments")),
                    optional_str(call.get("type"), f"{call_where}.type", line) or "function",
                ))
            legacy = item.get("function_call")
            if legacy is not None:
                legacy = expect_dict(legacy, f"{where}.function_call", line)
                legacy_calls += 1
                call_id = f"{NAME}-{legacy_calls}"
                unanswered_legacy.append(call_id)
                calls.append(ToolCall(
                    call_id,
                    optional_str(legacy.get("name"), f"{where}.function_call.name", line),
                    arguments_text(legacy.get("arguments")),
                ))
            for key in ("reasoning_content", "reasoning"):
                if isinstance(item.get(key), str):
                    meta["reasoning"] = item[key]
            if not text and isinstance(item.get("refusal"), str):
                text = item["refusal"]
            messages.append(Message.of("assistant", text, tool_calls=calls, meta=meta))
        elif role == "tool":
            messages.append(Message.of(
                "tool", text, name=name,
                tool_call_id=optional_str(item.get("tool_call_id"), f"{where}.tool_call_id", line),
                meta=meta,
            ))
        else:  # legacy `function` result: answers the latest unanswered function_call
            call_id = unanswered_legacy.pop() if unanswered_legacy else ""
            messages.append(Message.of("tool", text, name=name, tool_call_id=call_id, meta=meta))
    return messages


def _session(body: Any, line: int | None, key: str) -> Session:
    tools = response_schema = completion = None
    meta: dict[str, Any] = {}
    if isinstance(body, list):
        items, field = body, "messages"
    elif isinstance(body, dict):
        completion = _completion(body.get("response"))
        body = _request(body)
        items = expect_list(body.get("messages"), "messages", line)
        field = "messages"
        if body.get("tools") is not None:
            tools = expect_list(body["tools"], "tools", line)
        elif body.get("functions") is not None:
            tools = expect_list(body["functions"], "functions", line)
        response_format = body.get("response_format")
        if isinstance(response_format, dict) and response_format.get("type") != "text":
            response_schema = response_format
        if isinstance(body.get("model"), str):
            meta["model"] = body["model"]
    else:
        raise TranscriptError(
            f"a Chat Completions transcript should be an object or a list, not "
            f"{type_name(body)}",
            line=line,
        )
    if line is not None:
        meta["source_line"] = line
    messages = tuple(map_messages(items, field, line))
    if completion is not None:
        answer = response_message(completion, line)
        if answer is not None:
            messages = (*messages, answer)
        if "model" not in meta and isinstance(completion.get("model"), str):
            meta["model"] = completion["model"]
    return Session(
        format=NAME, title=title_from(messages, "OpenAI Chat conversation"), messages=messages,
        tools=tools, response_schema=response_schema, key=key, meta=meta,
    )


def parse(source: Source) -> list[Session]:
    if Probe(source).is_jsonl:
        sessions = [_session(body, line, f"line-{line}") for line, body in source.records()]
    else:
        sessions = [_session(source.document(), None, "")]
    return require_sessions(
        [session for session in sessions if session.messages], "the file has no messages"
    )
