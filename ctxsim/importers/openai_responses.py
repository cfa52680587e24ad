"""OpenAI Responses API: a request `{model, instructions, input, tools, text}`, a response
object `{object: "response", output}`, or a bare list of items.

`instructions` becomes a leading system message; `tools` and the structured-output format
(`text.format`) are kept on the session as given. A request logged with its response
(`{..., "response": {output, usage}}` or LiteLLM-style `{request, response}`) imports the
response's output too; the response's usage is the recorded usage of the call it answers.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session
from ctxsim.pipeline.usage import openai_recorded

from .common import AssistantDraft, HistoryBuilder, expect_list, require_sessions, title_from
from .errors import TranscriptError, type_name
from .responses_items import ITEM_TYPES, ItemMapper
from .source import Probe, Source

NAME = "openai-responses"


def _is_item_list(value: list[Any]) -> bool:
    """Typed Responses items (easy `{role, content}` messages may be mixed in)."""
    kinds = [item.get("type") for item in value if isinstance(item, dict)]
    return any(kind in ITEM_TYPES for kind in kinds) and all(
        kind is None or kind in ITEM_TYPES for kind in kinds
    )


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if isinstance(document, dict):
        request = document.get("request")
        if "input" not in document and isinstance(request, dict) and "input" in request:
            document = request
        if "messages" not in document and isinstance(document.get("input"), (list, str)):
            return True
        if document.get("object") == "response" and isinstance(document.get("output"), list):
            return True
        return "no `input` list or `output` list of a response object"
    if isinstance(document, list):
        if _is_item_list(document):
            return True
        return "the list's items are not typed Responses items"
    return "not one JSON document" if document is None else "not a JSON object or list"


def parse(source: Source) -> list[Session]:
    document = source.document()
    history = HistoryBuilder()
    mapper = ItemMapper(history)
    tools = response_schema = None
    meta: dict[str, Any] = {}
    logged_response: dict[str, Any] | None = None
    response_usage: Any = None
    if isinstance(document, list):
        items = document
        field = "item"
    elif isinstance(document, dict):
        response = document.get("response")
        request = document.get("request")
        if isinstance(request, dict) and "input" not in document:
            document = request  # a LiteLLM-style {request, response} log
        if isinstance(response, dict) and isinstance(response.get("output"), list):
            logged_response = response
        instructions = document.get("instructions")
        if isinstance(instructions, str) and instructions:
            history.add(Message.of("system", instructions, meta={"source": "instructions"}))
        if document.get("object") == "response":
            items = expect_list(document.get("output"), "output")
            field = "output"
            if document.get("usage") is not None:
                meta["usage"] = document["usage"]
                response_usage = document["usage"]
        else:
            given = document.get("input")
            field = "input"
            if isinstance(given, str):
                given = [{"role": "user", "content": given}]
            items = expect_list(given, "input")
        if document.get("tools") is not None:
            tools = expect_list(document.get("tools"), "tools")
        text_config = document.get("text")
        text_format = text_config.get("format") if isinstance(text_config, dict) else None
        if isinstance(text_format, dict) and text_format.get("type") != "text":
            response_schema = text_format
        for key in ("model", "id", "previous_response_id"):
            if isinstance(document.get(key), str):
                meta[key] = document[key]
    else:
        raise TranscriptError(
            f"a Responses transcript should be an object or a list, not {type_name(document)}"
        )
    for index, item in enumerate(items):
        try:
            mapper.add(item, {"item_index": index})
        except TranscriptError as error:
            raise TranscriptError(f"{field}[{index}]: {error.reason}") from None
    if logged_response is not None:
        # The response logged beside the request answers it: its output is the next message.
        history.close()
        for index, item in enumerate(logged_response["output"]):
            try:
                mapper.add(item, {"item_index": index, "source": "response"})
            except TranscriptError as error:
                raise TranscriptError(f"response.output[{index}]: {error.reason}") from None
        response_usage = logged_response.get("usage")
    if response_usage is not None:
        drafts = [item for item in history.items if isinstance(item, AssistantDraft)]
        recorded = openai_recorded(response_usage)
        if drafts and recorded is not None:
            drafts[-1].meta["usage"] = response_usage
            drafts[-1].meta["recorded"] = recorded
    messages = history.messages()
    warning: tuple[str, ...]
    if meta.get("previous_response_id"):
        warning = ("the request continues an earlier response (previous_response_id); the "
                   "history before it is not in this file",)
    else:
        warning = ()
    require_sessions(list(messages), "the Responses transcript has no items")
    return [Session(
        format=NAME, title=title_from(messages, "OpenAI Responses conversation"),
        messages=messages, tools=tools, response_schema=response_schema, meta=meta,
        warnings=warning,
    )]
