"""OpenHands event streams: a JSON array of action and observation events.

SPEC §7: an action is a tool call when at least one observation other than a `null`
observation names it as `cause`; its first such observation is the result. The call's id is
`tool_call_metadata.tool_call_id` when present, else `<format>-<n>` (n counts calls from 1 in
file order); its name is the action kind and its arguments the action's `args` (the thought
becomes the assistant text). Parallel calls of one model response (shared
`model_response.id`) form one assistant message. Other actions with text are plain messages;
state changes without text are left out.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .common import (
    HistoryBuilder,
    compact_json,
    data_url_part,
    expect_dict,
    expect_list,
    require_sessions,
    title_from,
)
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "openhands"


def is_event_list(value: Any) -> bool:
    events = [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
    return bool(events) and all(
        "action" in event or "observation" in event for event in events
    )


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if is_event_list(document):
        return True
    if isinstance(document, dict) and is_event_list(document.get("history")):
        return True  # resolver output: {issue, history, metrics, ...}
    if isinstance(document, dict) and is_event_list(document.get("trajectory")):
        return True  # the server's trajectory export: {"trajectory": [events]}
    return "not a list of events with `action`/`observation`"


def _flatten(history: list[Any]) -> list[Any]:
    """Old eval files store history as [action, observation] pairs, sometimes without ids:
    the pair itself then links the observation to its action."""
    if not history or not all(isinstance(item, list) for item in history):
        return history
    events: list[Any] = []
    for index, pair in enumerate(history):
        if len(pair) == 2 and isinstance(pair[0], dict) and isinstance(pair[1], dict):
            action, observation = dict(pair[0]), dict(pair[1])
            if "action" in action and action.get("id") is None:
                action["id"] = f"pair-{index}"
            if "observation" in observation and observation.get("cause") is None:
                observation["cause"] = action.get("id")
            events.extend((action, observation))
        else:
            events.extend(pair)
    return events


def _key(value: Any) -> str | None:
    return None if value is None else str(value)


def map_events(events: list[Any], counter: list[int], prefix: str, field: str = "events"
               ) -> tuple[tuple[Message, ...], Any]:
    """Events → (messages, tools); `counter` carries the synthetic call number across
    sessions of one file."""
    events = _flatten(events)
    results: dict[str, int] = {}
    for index, event in enumerate(events):
        event = expect_dict(event, f"{field}[{index}]")
        if "observation" in event and event.get("observation") != "null":
            cause = _key(event.get("cause"))
            if cause is not None and cause not in results:
                results[cause] = index
    actions_by_id: dict[str, int] = {}
    for index, event in enumerate(events):
        action_id = _key(event.get("id")) if "action" in event else None
        if action_id is not None:
            actions_by_id.setdefault(action_id, index)
    result_events = {
        results[action_id]: action_id for action_id in results if action_id in actions_by_id
    }

    history = HistoryBuilder()
    call_ids: dict[str, str] = {}
    tools = None
    for index, event in enumerate(events):
        where = f"{field}[{index}]"
        meta: dict[str, Any] = {"event_index": index}
        if isinstance(event.get("timestamp"), str):
            meta["timestamp"] = event["timestamp"]
        if event.get("id") is not None:
            meta["event_id"] = event["id"]
        if "action" in event:
            kind = event.get("action")
            args = event.get("args") if event.get("args") is not None else {}
            args = expect_dict(args, f"{where}.args")
            event_id = _key(event.get("id"))
            metadata = event.get("tool_call_metadata")
            metadata = metadata if isinstance(metadata, dict) else {}
            if event_id is not None and event_id in results and event_id in actions_by_id \
                    and actions_by_id[event_id] == index:
                counter[0] += 1
                call_id = metadata.get("tool_call_id")
                if not isinstance(call_id, str) or not call_id:
                    call_id = f"{prefix}-{counter[0]}"
                call_ids[event_id] = call_id
                fields = {key: value for key, value in args.items() if key != "thought"}
                response = metadata.get("model_response")
                response = response if isinstance(response, dict) else {}
                draft = history.assistant(response.get("id") or ("event", index), meta)
                if draft.meta is meta:
                    if isinstance(metadata.get("function_name"), str):
                        meta["function_name"] = metadata["function_name"]
                    if response.get("usage") is not None:
                        meta["usage"] = response["usage"]
                thought = args.get("thought")
                if isinstance(thought, str) and thought:
                    draft.texts.append(thought)
                draft.add_call(ToolCall(call_id, str(kind), compact_json(fields)))
                continue
            if kind == "system":
                if isinstance(args.get("tools"), list):
                    tools = args["tools"]
                history.add(Message.of("system", _str(args.get("content")), meta=meta))
                continue
            text = next(
                (args[key] for key in ("content", "final_thought", "thought")
                 if isinstance(args.get(key), str) and args[key]),
                "",
            )
            images = args.get("image_urls")
            if isinstance(images, list) and images:
                meta["binary_parts"] = [
                    data_url_part("image", url) for url in images if isinstance(url, str)
                ]
            if not text and not meta.get("binary_parts"):
                continue
            role = "user" if event.get("source") == "user" else "assistant"
            if role == "user":
                history.add(Message.of("user", text, meta=meta))
            else:
                meta["action"] = kind
                history.close()
                history.assistant(None, meta).texts.append(text)
                history.close()
            continue
        if "observation" not in event:
            continue
        kind = event.get("observation")
        content = _str(event.get("content"))
        if index in result_events:
            action_id = result_events[index]
            meta["observation"] = kind
            history.add(Message.of(
                "tool", content, tool_call_id=call_ids.get(action_id, ""),
                is_error=kind == "error" or event.get("success") is False, meta=meta,
            ))
        elif kind == "error" and content:
            history.add(Message.of("user", content, is_error=True, meta=meta))
    return history.messages(), tools


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else compact_json(value)


def parse(source: Source) -> list[Session]:
    document = source.document()
    meta: dict[str, Any] = {}
    if isinstance(document, dict):
        key = "trajectory" if "history" not in document and "trajectory" in document else "history"
        events = expect_list(document.get(key), key)
        for key in ("issue", "success"):
            if key in document and not isinstance(document[key], (dict, list)):
                meta[key] = document[key]
    elif isinstance(document, list):
        events = document
    else:
        raise TranscriptError(
            f"an OpenHands trajectory should be a list of events, not {type_name(document)}"
        )
    messages, tools = map_events(events, [0], NAME)
    require_sessions(list(messages), "the event list has no messages or actions")
    return [Session(
        format=NAME, title=title_from(messages, "OpenHands trajectory"),
        messages=messages, tools=tools, meta=meta,
    )]
