"""Anthropic Messages API: a request body `{model, max_tokens, system?, messages, tools?}` or a
bare messages array.

`system` becomes a leading system message; `tool_result` blocks of a user message become
`tool` messages ahead of its text. Consecutive assistant messages (which the API merges into
one turn) become one assistant message, so each answers one model call.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session
from ctxsim.pipeline.usage import anthropic_recorded

from .anthropic_content import split_assistant, split_user, system_text
from .common import HistoryBuilder, Names, expect_dict, expect_list, require_sessions, title_from
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "anthropic-messages"

SIGNATURE_BLOCKS = Names({"tool_use", "tool_result", "thinking", "redacted_thinking"})


def _has_anthropic_blocks(messages: Any) -> bool:
    if not isinstance(messages, list):
        return False
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if not isinstance(block, dict):
                continue
            if block.get("type") in SIGNATURE_BLOCKS:
                return True
            if block.get("type") == "image" and isinstance(block.get("source"), dict):
                return True
    return False


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if isinstance(document, dict) and "messages" not in document \
            and isinstance(document.get("request"), dict):
        document = document["request"]
    if isinstance(document, dict) and isinstance(document.get("messages"), list):
        if _has_anthropic_blocks(document["messages"]):
            return True
        if "max_tokens" in document and isinstance(document.get("system"), (str, list)):
            return True
        tools = document.get("tools")
        if isinstance(tools, list) and any(
            isinstance(tool, dict) and "input_schema" in tool for tool in tools
        ):
            return True
        return "no Anthropic content blocks, `system` + `max_tokens` or `input_schema` tools"
    if isinstance(document, list) and _has_anthropic_blocks(document):
        return True
    return "no messages with Anthropic content blocks"


def parse(source: Source) -> list[Session]:
    document = source.document()
    history = HistoryBuilder()
    tools = response_schema = None
    meta: dict[str, Any] = {}
    if isinstance(document, dict):
        response = document.get("response")
        request = document.get("request")
        if "messages" not in document and isinstance(request, dict):
            document = request  # a LiteLLM-style {request, response} log
        items = expect_list(document.get("messages"), "messages")
        if isinstance(response, dict) and response.get("type") == "message":
            # The logged response answers the request: its assistant message and usage.
            items = [*items, dict(response, role="assistant")]
        system = system_text(document.get("system"))
        if system:
            history.add(Message.of("system", system, meta={"source": "system"}))
        if document.get("tools") is not None:
            tools = expect_list(document["tools"], "tools")
        for key in ("output_format", "response_format"):
            if isinstance(document.get(key), dict):
                response_schema = document[key]
        if isinstance(document.get("model"), str):
            meta["model"] = document["model"]
    elif isinstance(document, list):
        items = document
    else:
        raise TranscriptError(
            f"an Anthropic transcript should be an object or a list, not {type_name(document)}"
        )
    turn = 0
    for index, item in enumerate(items):
        where = f"messages[{index}]"
        item = expect_dict(item, where)
        role = item.get("role")
        message_meta: dict[str, Any] = {"message_index": index}
        if role == "assistant":
            content = split_assistant(item.get("content"), f"{where}.content", None)
            draft = history.assistant(("turn", turn), message_meta)
            draft.texts.extend(content.texts)
            if content.thinking:
                draft.meta.setdefault("thinking", []).extend(content.thinking)
            for call in content.calls:
                draft.add_call(call)
            if isinstance(item.get("usage"), dict):
                draft.meta["usage"] = item["usage"]
                recorded = anthropic_recorded(item["usage"])
                if recorded is not None and "recorded" not in draft.meta:
                    draft.meta["recorded"] = recorded
            if content.compaction is not None:
                draft.meta["anthropic_compaction"] = content.compaction
        elif role in ("user", "system"):
            turn += 1
            if role == "system":
                history.add(Message.of("system", system_text(item.get("content"), where)))
                continue
            content_u = split_user(item.get("content"), f"{where}.content", None)
            for tool_use_id, text, is_error, parts in content_u.results:
                meta_r = dict(message_meta, binary_parts=parts) if parts else message_meta
                history.add(Message.of(
                    "tool", text, tool_call_id=tool_use_id, is_error=is_error, meta=meta_r
                ))
            if content_u.texts or content_u.binary_parts or not content_u.results:
                if content_u.binary_parts:
                    message_meta["binary_parts"] = content_u.binary_parts
                history.add(Message.of("user", "".join(content_u.texts), meta=message_meta))
            history.close()
        else:
            raise TranscriptError(f"`{where}.role` should be user or assistant, not {role!r}")
    messages = history.messages()
    require_sessions(list(messages), "the file has no messages")
    _add_recorded(meta, messages)
    return [Session(
        format=NAME, title=title_from(messages, "Anthropic conversation"), messages=messages,
        tools=tools, response_schema=response_schema, meta=meta,
    )]


def _add_recorded(meta: dict[str, Any], messages: tuple[Message, ...]) -> None:
    """Session `meta.recorded_compactions` (SPEC-agents §2.5.0.5): the compaction blocks."""
    from ctxsim.pipeline.agents_common import recorded_compactions

    recorded = [{k: v for k, v in e.items() if k != "call_index"}
                for e in recorded_compactions(messages)]
    if recorded:
        meta["recorded_compactions"] = recorded
