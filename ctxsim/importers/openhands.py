"""OpenHands event streams: a JSON array of action and observation events.

SPEC §7: an action is a tool call when at least one observation other than a `null`
observation names it as `cause`; its first such observation is the result. The call's id is
`tool_call_metadata.tool_call_id` when present, else `<format>-<n>` (n counts calls from 1 in
file order); its name is the action kind and its arguments the action's `args` (the thought
becomes the assistant text). Parallel calls of one model response (shared
`model_response.id`) form one assistant message. Other actions with text are plain messages;
state changes without text are left out.

A session folder as OpenHands (V0) keeps it on disk (`sessions/<id>/events/<n>.json`, one
event per file, numbered from 0) is accepted as an archive of the folder: its events in
number order are the event list (several folders give several sessions).

SPEC §11: `recall` actions are issued by the runtime (microagent knowledge), not by the
model, so they are neither tool calls nor model calls; a recall observation with text becomes
a user message. An assistant message's recorded usage is its response's entry in the run's
`metrics.token_usages` (matched by response id), else the event's `model_response.usage`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.pipeline.usage import openai_recorded

from .archive import Archive, archive_verdict, json_member
from .common import (
    AssistantDraft,
    HistoryBuilder,
    compact_json,
    data_url_part,
    expect_dict,
    expect_list,
    require_sessions,
    title_from,
)
from .errors import TranscriptError, type_name
from .recorded import mark_next, with_recorded_compactions
from .source import Probe, Source

NAME = "openhands"
ACCEPTS_ARCHIVE = True
_EVENT_FILE = re.compile(r"(?:^|/)events/(\d+)\.json$")
# The arguments of a `CondensationAction` (openhands/events/action/agent.py).
CONDENSATION_ACTIONS = ("condensation", "condensation_request")
CONDENSATION_ARGS = ("forgotten_event_ids", "forgotten_events_start_id",
                     "forgotten_events_end_id", "summary", "summary_offset")


def is_event_list(value: Any) -> bool:
    events = [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
    return bool(events) and all(
        "action" in event or "observation" in event for event in events
    )


def detect(probe: Probe) -> bool | str:
    if probe.source.archive:
        return archive_verdict(probe, _session_folders, "the archive has no events/<n>.json file")
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


def token_usage_recorded(usage: Any) -> dict[str, Any] | None:
    """One entry of OpenHands' `metrics.token_usages` (prompt tokens include the cache)."""
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    read = usage.get("cache_read_tokens") if isinstance(usage.get("cache_read_tokens"), int) \
        else None
    write = usage.get("cache_write_tokens") \
        if isinstance(usage.get("cache_write_tokens"), int) else None
    output = usage.get("completion_tokens") \
        if isinstance(usage.get("completion_tokens"), int) else None
    total = usage["prompt_tokens"]
    return {"total_input": total, "input": total - (read or 0) - (write or 0),
            "cache_read": read, "cache_write": write, "output": output, "reasoning": None}


def usages_by_response(token_usages: Any) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for usage in token_usages if isinstance(token_usages, list) else ():
        recorded = token_usage_recorded(usage)
        response_id = usage.get("response_id") if isinstance(usage, dict) else None
        if recorded is not None and isinstance(response_id, str) and response_id:
            found.setdefault(response_id, recorded)
    return found


def _fill_between_anchors(drafts: list[AssistantDraft], token_usages: Any) -> None:
    """Responses no event names (a final message without tool metadata) still have their
    `token_usages` entry, in call order. Between two calls matched by response id, when the
    unmatched calls and the unmatched entries are equally many, they pair up in order; any
    other gap is left without usage rather than guessed."""
    entries = [u for u in token_usages if isinstance(u, dict)] \
        if isinstance(token_usages, list) else []
    if not entries or not drafts:
        return
    position = {u.get("response_id"): i for i, u in reversed(list(enumerate(entries)))
                if isinstance(u.get("response_id"), str)}
    anchors = [(d, position.get(d.meta.get("response_id"))) for d in drafts]
    gap: list[AssistantDraft] = []
    last = -1
    for draft, at in [*anchors, (None, len(entries))]:
        if draft is not None and (at is None or at <= last):
            if "recorded" not in draft.meta:
                gap.append(draft)
            continue
        between = entries[last + 1:at]
        if gap and len(gap) == len(between):
            for waiting, usage in zip(gap, between, strict=True):
                recorded = token_usage_recorded(usage)
                if recorded is not None:
                    waiting.meta["recorded"] = recorded
        gap = []
        last = at  # type: ignore[assignment]


def _record_usage(meta: dict[str, Any], metadata: dict[str, Any],
                  usages: dict[str, dict[str, Any]], billed: set[str]) -> None:
    """Put the response's recorded usage on the message it starts, once per response."""
    response = metadata.get("model_response")
    response = response if isinstance(response, dict) else {}
    response_id = response.get("id") if isinstance(response.get("id"), str) else None
    if response_id is not None and response_id in billed:
        return
    if response_id is not None:
        meta["response_id"] = response_id
    recorded = usages.get(response_id) if response_id else None
    if recorded is None:
        recorded = openai_recorded(response.get("usage"))
    if recorded is not None:
        meta["recorded"] = dict(recorded)
        if response_id is not None:
            billed.add(response_id)


def map_events(events: list[Any], counter: list[int], prefix: str, field: str = "events",
               token_usages: Any = None) -> tuple[tuple[Message, ...], Any]:
    """Events → (messages, tools); `counter` carries the synthetic call number across
    sessions of one file; `token_usages` is the run's `metrics.token_usages` when known."""
    events = _flatten(events)
    usages = usages_by_response(token_usages)
    billed: set[str] = set()
    recalls = {
        _key(event.get("id")) for event in events
        if isinstance(event, dict) and event.get("action") == "recall"
    }
    results: dict[str, int] = {}
    for index, event in enumerate(events):
        event = expect_dict(event, f"{field}[{index}]")
        if event.get("observation") == "recall" or _key(event.get("cause")) in recalls - {None}:
            continue
        if "observation" in event and event.get("observation") != "null":
            cause = _key(event.get("cause"))
            if cause is not None and cause not in results:
                results[cause] = index
    actions_by_id: dict[str, int] = {}
    for index, event in enumerate(events):
        action_id = _key(event.get("id")) if "action" in event else None
        if action_id is not None and event.get("action") not in CONDENSATION_ACTIONS:
            actions_by_id.setdefault(action_id, index)
    result_events = {
        results[action_id]: action_id for action_id in results if action_id in actions_by_id
    }

    history = HistoryBuilder()
    call_ids: dict[str, str] = {}
    tools = None
    # SPEC-agents §2.5.0.5: condensation events mark the next message.
    condensations: list[tuple[int, dict[str, Any]]] = []
    requests: list[int] = []
    for index, event in enumerate(events):
        where = f"{field}[{index}]"
        if event.get("action") in CONDENSATION_ACTIONS:
            if event["action"] == "condensation_request":
                requests.append(index)
            else:
                args = event.get("args") if isinstance(event.get("args"), dict) else {}
                condensations.append((index, {k: args[k] for k in CONDENSATION_ARGS
                                              if k in args}))
            continue
        meta: dict[str, Any] = {"event_index": index}
        if isinstance(event.get("timestamp"), str):
            meta["timestamp"] = event["timestamp"]
        if event.get("id") is not None:
            meta["event_id"] = event["id"]
        if "action" in event:
            kind = event.get("action")
            if kind == "recall":
                continue
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
                    _record_usage(meta, metadata, usages, billed)
                thought = args.get("thought")
                if isinstance(thought, str) and thought:
                    draft.texts.append(thought)
                draft.add_call(ToolCall(call_id, str(kind), compact_json(fields)))
                draft.meta.setdefault("call_event_ids", []).append(event.get("id"))
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
                metadata = event.get("tool_call_metadata")
                if isinstance(metadata, dict):
                    _record_usage(meta, metadata, usages, billed)
                history.close()
                history.assistant(None, meta).texts.append(text)
                history.close()
            continue
        if "observation" not in event:
            continue
        kind = event.get("observation")
        content = _str(event.get("content"))
        if kind == "recall" or _key(event.get("cause")) in recalls - {None}:
            if content:
                meta["recall"] = True
                history.add(Message.of("user", content, meta=meta))
        elif index in result_events:
            action_id = result_events[index]
            meta["observation"] = kind
            history.add(Message.of(
                "tool", content, tool_call_id=call_ids.get(action_id, ""),
                is_error=kind == "error" or event.get("success") is False, meta=meta,
            ))
        elif kind == "error" and content:
            history.add(Message.of("user", content, is_error=True, meta=meta))
    if token_usages:
        _fill_between_anchors(
            [item for item in history.items if isinstance(item, AssistantDraft)], token_usages
        )
    messages = history.messages()
    for index, args in condensations:
        messages = mark_next(messages, [index], "openhands_condensation", "event_index", args)
    messages = mark_next(messages, requests, "openhands_condensation_request", "event_index",
                         True)
    return messages, tools


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else compact_json(value)


def _session_folders(archive: Archive) -> dict[str, list[tuple[int, str]]]:
    """Each session folder of the archive with its event files, by event number."""
    folders: dict[str, list[tuple[int, str]]] = {}
    for name in archive.names:
        found = _EVENT_FILE.search(name)
        if found:
            folder = posixpath.dirname(posixpath.dirname(name))
            folders.setdefault(folder, []).append((int(found.group(1)), name))
    return folders


def _folder_sessions(source: Source) -> list[Session]:
    sessions = []
    with Archive(source) as archive:
        for folder, files in sorted(_session_folders(archive).items()):
            events = [json_member(archive, name) for _, name in sorted(files)]
            messages, tools = map_events(events, [0], NAME)
            where = folder or "the archive"
            require_sessions(list(messages), f"{where}: the events hold no messages or actions")
            sessions.append(Session(
                format=NAME, title=title_from(messages, "OpenHands session"),
                messages=messages, tools=tools, key=posixpath.basename(folder) or "session",
                meta=with_recorded_compactions({"session_folder": folder or "."}, messages)))
    return sessions


def parse(source: Source) -> list[Session]:
    if source.archive:
        return _folder_sessions(source)
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
    metrics = document.get("metrics") if isinstance(document, dict) else None
    token_usages = metrics.get("token_usages") if isinstance(metrics, dict) else None
    messages, tools = map_events(events, [0], NAME, token_usages=token_usages)
    require_sessions(list(messages), "the event list has no messages or actions")
    return [Session(
        format=NAME, title=title_from(messages, "OpenHands trajectory"),
        messages=messages, tools=tools, meta=with_recorded_compactions(meta, messages),
    )]
