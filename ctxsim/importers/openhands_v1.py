"""OpenHands V1 (software-agent-sdk) event logs: every event has `kind`, `id`, `timestamp`,
`source`. Accepted as a conversation directory in an archive (`base_state.json` +
`events/event-NNNNN-<id>.json`; several directories give several sessions; loose event files
uploaded together are packed into one), a JSON Lines file of events, or a JSON array of events.

Mapping: `SystemPromptEvent` → the leading system message (its `tools` kept); `MessageEvent`
→ a user or assistant message (`llm_message` text; image URLs as binary metadata); every
`ActionEvent` is one tool call (`tool_call_id`, `tool_name`, `tool_call.arguments`), parallel
calls sharing `llm_response_id` forming one assistant message whose text is the first action's
`thought`; `ObservationEvent`, `AgentErrorEvent` (`is_error`) and `UserRejectObservation`
(`is_error`) answer the call with their `tool_call_id`. State events (`ConversationStateUpdate`,
`Pause`, …) are not conversation.

Recorded compactions (SPEC-agents §2.5.0.5): a `Condensation` event puts
`meta.openhands_condensation = {forgotten_event_ids, summary, summary_offset, llm_response_id}`
on the next message, a `CondensationRequest` `meta.openhands_condensation_request = true`;
every message keeps its event id (`meta.event_id`, `meta.call_event_ids` on assistant
messages) so a replay can map the forgotten ids. Usage (SPEC §11): the run's `token_usages`
(in `base_state.json` `stats`, an eval line's `metrics`, else the log's last `stats` state
update) matched by `llm_response_id`. An observation whose action is not in the log (a cut
log) is a user message, with a warning, not a result.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .archive import Archive, archive_verdict, json_member
from .common import (
    HistoryBuilder,
    arguments_text,
    compact_json,
    data_url_part,
    expect_dict,
    obj,
    require_sessions,
    title_from,
)
from .errors import Near, TranscriptError, type_name
from .openhands import usages_by_response
from .recorded import mark_next, with_recorded_compactions
from .source import Probe, Source

NAME = "openhands-v1"
ACCEPTS_ARCHIVE = True
LABEL = "OpenHands V1"
RESULT_KINDS = ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation")
CONDENSATION_FIELDS = ("forgotten_event_ids", "summary", "summary_offset", "llm_response_id")
_EVENT_FILE = re.compile(r"event-(\d+)-[^/]*\.json$")


def is_event(value: Any) -> bool:
    kind = value.get("kind") if isinstance(value, dict) else None
    return isinstance(kind, str) and (kind.endswith("Event") or kind.startswith("Condensation")
                                      or kind == "UserRejectObservation")


def detect(probe: Probe) -> bool | str:
    if probe.source.archive:
        return archive_verdict(probe, _event_files,
                               "the archive has no events/event-NNNNN-<id>.json file")
    if probe.is_jsonl:
        if is_event(probe.first_record):
            return True
        return "JSON Lines whose first line is not an event with `kind`"
    document = probe.document()
    events = document.get("events") if isinstance(document, dict) else document
    if isinstance(events, list) and events and all(is_event(e) for e in events[:50]):
        return True
    if is_event(document):
        return True  # a single event file
    if isinstance(events, list) and any(is_event(e) for e in events[:50]):
        return Near("some items are V1 events (`kind` …Event) but others are not", 2)
    return "not a list of events with `kind`"


def _event_files(archive: Archive) -> list[str]:
    return [n for n in archive.names if _EVENT_FILE.search(n)]


def find_token_usages(value: Any, depth: int = 0) -> list[Any]:
    """Every `token_usages` list inside the run's stats or metrics (per LLM usage id)."""
    if depth > 6:
        return []
    found: list[Any] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "token_usages" and isinstance(inner, list):
                found.extend(inner)
            else:
                found.extend(find_token_usages(inner, depth + 1))
    elif isinstance(value, list):
        for inner in value:
            found.extend(find_token_usages(inner, depth + 1))
    return found


def _content_text(content: Any) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    items = content if isinstance(content, list) else [content] if isinstance(content, dict) \
        else []
    for part in items:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        for url in part.get("image_urls") or () if isinstance(part.get("image_urls"), list) \
                else ():
            if isinstance(url, str):
                media.append(data_url_part("image", url))
    return "".join(texts), media


# What the SDK puts before an observation's content for the model when it is an error:
# `Observation.ERROR_MESSAGE_HEADER` (observations with `is_error`, since late 2025), and the
# terminal's own header before that (`ExecuteBashObservation` with `error`).
ERROR_HEADER = "[An error occurred during execution.]\n"
OLD_TERMINAL_ERROR_HEADER = "[There was an error during command execution.]\n"
TERMINAL_KINDS = frozenset({"TerminalObservation", "ExecuteBashObservation"})


def observation_error(observation: Any) -> bool:
    return isinstance(observation, dict) and (observation.get("is_error") is True
                                              or observation.get("error") is True)


def _observation_text(event: dict[str, Any]) -> str:
    """An observation as the SDK sends it to the model (`to_llm_content`): the content, with
    the error header when it is an error; a terminal's output between its PS1 metadata's
    `prefix` and `suffix`, then its working directory, Python interpreter and exit code
    (software-agent-sdk, openhands-tools terminal/definition.py; the SDK's middle cut of
    outputs over 30,000 characters is not applied)."""
    if event.get("kind") == "AgentErrorEvent":
        return _str(event.get("error"))
    if event.get("kind") == "UserRejectObservation":
        # What the SDK sends for it (event/llm_convertible/observation.py, to_llm_message).
        return f"Action rejected: {_str(event.get('rejection_reason'))}"
    observation = event.get("observation")
    if not isinstance(observation, dict):
        return _str(observation)
    text = (_content_text(observation["content"])[0] if "content" in observation
            else _str(observation.get("output")))
    metadata = observation.get("metadata")
    terminal = _str(observation.get("kind")) in TERMINAL_KINDS
    if terminal and isinstance(metadata, dict):
        text = f"{_str(metadata.get('prefix'))}{text}{_str(metadata.get('suffix'))}"
        if metadata.get("working_dir"):
            text += f"\n[Current working directory: {_str(metadata['working_dir'])}]"
        if metadata.get("py_interpreter_path"):
            text += f"\n[Python interpreter: {_str(metadata['py_interpreter_path'])}]"
        code = metadata.get("exit_code", -1)
        if code != -1:
            text += f"\n[Command finished with exit code {code if code is None else _str(code)}]"
    if observation.get("is_error") is True:
        return ERROR_HEADER + text
    if observation.get("error") is True and terminal:
        return OLD_TERMINAL_ERROR_HEADER + text
    return text


def _str(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else compact_json(value)


def map_events(events: list[Any], where: str, token_usages: list[Any]
               ) -> tuple[tuple[Message, ...], Any]:
    usages = usages_by_response(token_usages)
    history = HistoryBuilder()
    tools = None
    condensations: list[tuple[int, dict[str, Any]]] = []
    requests: list[int] = []
    billed: set[str] = set()
    called: set[str] = set()
    for index, event in enumerate(events):
        event = expect_dict(event, f"{where}[{index}]")
        kind = event.get("kind")
        meta: dict[str, Any] = {"event_index": index}
        if event.get("id") is not None:
            meta["event_id"] = event["id"]
        if isinstance(event.get("timestamp"), str):
            meta["timestamp"] = event["timestamp"]
        response_id = event.get("llm_response_id")
        if isinstance(response_id, str) and response_id and response_id not in billed \
                and response_id in usages:
            meta["recorded"] = dict(usages[response_id])
        if kind == "SystemPromptEvent":
            text, _ = _content_text(event.get("system_prompt"))
            if isinstance(event.get("tools"), list):
                tools = event["tools"]
            history.add(Message.of("system", text, meta=meta))
        elif kind == "MessageEvent":
            message = expect_dict(event.get("llm_message"), f"{where}[{index}].llm_message")
            text, media = _content_text(message.get("content"))
            if media:
                meta["binary_parts"] = media
            role = message.get("role")
            if role == "assistant" or (role is None and event.get("source") == "agent"):
                history.close()
                history.assistant(None, meta).texts.append(text)
                history.close()
                if "recorded" in meta:
                    billed.add(str(response_id))
            else:
                history.add(Message.of("system" if role == "system" else "user", text,
                                       meta=meta))
        elif kind == "ActionEvent":
            key = response_id if isinstance(response_id, str) and response_id else ("e", index)
            draft = history.assistant(key, meta)
            if draft.meta is meta:
                thought, _ = _content_text(event.get("thought"))
                draft.texts.append(thought)
                if isinstance(event.get("reasoning_content"), str):
                    meta["reasoning_content"] = event["reasoning_content"]
                if "recorded" in meta:
                    billed.add(str(response_id))
            call = obj(event.get("tool_call"))
            call_id = str(event.get("tool_call_id") or call.get("id") or f"{NAME}-{index}")
            arguments = call.get("arguments") if "arguments" in call else {
                k: v for k, v in (event.get("action") or {}).items() if k != "kind"}
            called.add(call_id)
            draft.add_call(ToolCall(call_id, str(event.get("tool_name") or call.get("name") or ""),
                                    arguments_text(arguments)))
            draft.meta.setdefault("call_event_ids", []).append(event.get("id"))
        elif kind == "AgentErrorEvent" and not event.get("tool_call_id"):
            # An error the agent reports outside any call: what the model is told next.
            history.add(Message.of("user", _str(event.get("error")), is_error=True, meta=meta))
        elif kind in RESULT_KINDS:
            call_id = str(event.get("tool_call_id") or "")
            observation = event.get("observation")
            error = kind != "ObservationEvent" or observation_error(observation)
            meta["observation"] = observation.get("kind") if isinstance(observation, dict) \
                else kind
            if call_id not in called:
                # A result whose action is not in the log (a cut or filtered log): what the
                # model was told, but no call's answer.
                meta["orphan_result"] = call_id
                history.add(Message.of("user", _observation_text(event), is_error=error,
                                       meta=meta))
                continue
            history.add(Message.of("tool", _observation_text(event), tool_call_id=call_id,
                                   is_error=error, meta=meta))
        elif kind == "Condensation":
            condensations.append((index, {k: event[k] for k in CONDENSATION_FIELDS
                                          if k in event}))
        elif kind == "CondensationRequest":
            requests.append(index)
    messages = history.messages()
    for index, fields in condensations:
        messages = mark_next(messages, [index], "openhands_condensation", "event_index", fields)
    messages = mark_next(messages, requests, "openhands_condensation_request", "event_index",
                         True)
    return messages, tools


def _session(events: list[Any], key: str, where: str, meta: dict[str, Any],
             token_usages: list[Any], fallback_task: str = "") -> Session:
    if not token_usages:
        # The run's statistics also travel in the log, as `stats` state updates (the last one
        # holds them all).
        stats = [e.get("value") for e in events if isinstance(e, dict)
                 and e.get("kind") == "ConversationStateUpdateEvent" and e.get("key") == "stats"]
        token_usages = find_token_usages(stats[-1]) if stats else []
    try:
        messages, tools = map_events(events, where, token_usages)
    except TranscriptError as error:
        raise TranscriptError(f"{LABEL}: {error.reason}", line=error.line) from None
    if fallback_task and not any(m.role == "user" for m in messages):
        first = Message.of("user", fallback_task, meta={"source": "instruction"})
        lead = [m for m in messages if m.role == "system"]
        messages = (*lead, first, *messages[len(lead):])
    require_sessions(list(messages), f"{where} has no messages or actions")
    stamps = [e.get("timestamp") for e in events if isinstance(e, dict)
              and isinstance(e.get("timestamp"), str)]
    if stamps:
        meta.update(started=stamps[0], ended=stamps[-1])  # no time zone, as recorded
    orphans = sum(1 for m in messages if m.meta.get("orphan_result"))
    warnings = (f"{orphans} tool result(s) answer an action that is not in the log: kept as "
                "user messages",) if orphans else ()
    return Session(format=meta.pop("format", NAME), title=title_from(messages, "OpenHands run"),
                   messages=tuple(messages), tools=tools, key=key,
                   meta=with_recorded_compactions(meta, messages), warnings=warnings)


def _directory_sessions(archive: Archive) -> list[Session]:
    groups: dict[str, list[tuple[int, str]]] = {}
    for name in _event_files(archive):
        folder = posixpath.dirname(name)
        conversation = posixpath.dirname(folder) if posixpath.basename(folder) == "events" \
            else folder
        match = _EVENT_FILE.search(name)
        assert match is not None
        groups.setdefault(conversation, []).append((int(match.group(1)), name))
    sessions = []
    for conversation, files in groups.items():
        events = []
        for _, name in sorted(files):
            event = json_member(archive, name)
            if not isinstance(event, dict):
                raise TranscriptError(f"{name}: an event should be a JSON object, "
                                      f"not {type_name(event)}")
            events.append(event)
        meta: dict[str, Any] = {"conversation": conversation or "."}
        usages: list[Any] = []
        state_name = posixpath.join(conversation, "base_state.json") if conversation \
            else "base_state.json"
        if state_name in archive.names:
            state = json_member(archive, state_name)
            if isinstance(state, dict):
                usages = find_token_usages(state.get("stats"))
                meta.update(base_state_meta(state))
        sessions.append(_session(events, conversation or "conversation", conversation or
                                 "the events", meta, usages))
    return sessions


def base_state_meta(state: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if isinstance(state.get("id"), str):
        meta["conversation_id"] = state["id"]
    agent = obj(state.get("agent"))
    llm = obj(agent.get("llm"))
    if isinstance(llm.get("model"), str):
        meta["model"] = llm["model"]
    if isinstance(agent.get("condenser"), dict):
        # Its arguments (max_size, keep_first, …) without its LLM block, which holds the
        # (masked) API key: the condenser's model name is enough.
        condenser = {k: v for k, v in agent["condenser"].items() if k != "llm"}
        if isinstance(obj(agent["condenser"].get("llm")).get("model"), str):
            condenser["llm_model"] = agent["condenser"]["llm"]["model"]
        meta["condenser"] = condenser
    return meta


def parse(source: Source) -> list[Session]:
    if source.archive:
        with Archive(source) as archive:
            return require_sessions(_directory_sessions(archive), "no conversation directory")
    if Probe(source).is_jsonl:
        events = []
        for line, event in source.records():
            if not isinstance(event, dict):
                raise TranscriptError(f"{LABEL}: each line should be an event object, "
                                      f"not {type_name(event)}", line=line)
            events.append(event)
        return [_session(events, "events", "the file", {}, [])]
    document = source.document()
    found = document.get("events") if isinstance(document, dict) and "events" in document \
        else document
    if is_event(found):
        found = [found]
    if not isinstance(found, list):
        raise TranscriptError(f"{LABEL}: the file should hold a list of events, "
                              f"not {type_name(found)}")
    return [_session(found, "events", "the file", {}, [])]

