"""Codex CLI rollout JSONL, CLI 0.40 and later: `{"timestamp","type","payload"}` per line.

Only `response_item` lines are conversation (the `event_msg` lines repeat them for the UI);
`event_msg/token_count` gives each request's usage (`last_token_usage`, not the cumulative
total). The session's `instructions` become a leading system message (SPEC §7).

Usage is aligned by count, never by position (SPEC §11): 0.40 writes a response's
`token_count` before its items, 0.58 after them and again (unchanged) after the next turn
context. Only the events whose `total_token_usage.total_tokens` changed since the previous
event are responses (it grows, or restarts lower: a `last_token_usage` that belongs to a new
model call whatever the running total did); the k-th of them answered the k-th model call,
i.e. the k-th assistant message.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session
from ctxsim.pipeline.usage import codex_recorded

from .codex_shell_text import as_sent
from .common import HistoryBuilder, Names, expect_dict, require_sessions, title_from
from .errors import TranscriptError, type_name
from .recorded import codex_markers, message_dict, with_recorded_compactions
from .responses_items import CALL_TYPES, OUTPUT_TYPES, ItemMapper
from .source import Probe, Source
from .titles import request_line

NAME = "codex"

LINE_TYPES = Names({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})


def detect(probe: Probe) -> bool | str:
    if not probe.records:
        return "not JSON Lines"
    first = probe.first_record
    if (
        isinstance(first, dict)
        and first.get("type") in LINE_TYPES
        and "payload" in first
    ):
        return True
    return "the first line is not a {timestamp, type, payload} rollout line"


def instructions_text(meta: dict[str, Any]) -> str:
    """The system prompt a rollout records: `instructions`, else `base_instructions.text`."""
    instructions = meta.get("instructions")
    if isinstance(instructions, str) and instructions:
        return instructions
    base = meta.get("base_instructions")
    if isinstance(base, dict) and isinstance(base.get("text"), str):
        return base["text"]
    return ""


def parse(source: Source) -> list[Session]:
    history = HistoryBuilder()
    mapper = ItemMapper(history)
    session_meta: dict[str, Any] = {}
    models: list[str] = []
    human_prompt = ""
    first_timestamp = last_timestamp = None
    # SPEC-agents §2.5.0.5: where the rollout recorded compactions and truncation policies.
    boundary_lines: list[int] = []
    compacted_pending: Message | None = None
    compacted_events: set[int] = set()
    policy: dict[str, Any] | None = None
    window: int | None = None
    usages: list[tuple[int, Any]] = []  # (line, a response's `last_token_usage`)
    last_total: int | None = None
    turn_lines: list[int] = []  # every `turn_context` line
    first_output: int | None = None  # the line of the first item the model produced
    for line, record in source.records():
        if not isinstance(record, dict):
            raise TranscriptError(
                f"each rollout line should be a JSON object, not {type_name(record)}", line=line
            )
        kind = record.get("type")
        payload = record.get("payload")
        timestamp = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        if timestamp:
            first_timestamp = first_timestamp or timestamp
            last_timestamp = timestamp
        if kind == "response_item":
            if first_output is None and _is_model_output(payload):
                first_output = line
            item_meta: dict[str, Any] = {"source_line": line, "timestamp": timestamp}
            if policy is not None and isinstance(payload, dict) and \
                    payload.get("type") in OUTPUT_TYPES:
                item_meta["codex_truncation_policy"] = policy
            mapper.add(payload, item_meta, line, "payload")
        elif kind == "event_msg":
            payload = expect_dict(payload, "payload", line)
            event = payload.get("type")
            if event == "context_compacted":
                if compacted_pending is not None:
                    compacted_events.add(id(compacted_pending))
                    compacted_pending = None
                else:
                    boundary_lines.append(line)
            if event == "token_count" and isinstance(payload.get("info"), dict):
                info = payload["info"]
                if window is None and _positive_int(info.get("model_context_window")):
                    window = info["model_context_window"]
                total = info.get("total_token_usage")
                total = total.get("total_tokens") if isinstance(total, dict) else None
                # A response is an event whose running total moved: up, or down when the
                # counter restarted (1,363,408 → 37,543 in one real rollout); a repeat of the
                # previous event leaves it as it was.
                if isinstance(total, int) and total != last_total:
                    usages.append((line, info.get("last_token_usage")))
                elif total is None and isinstance(info.get("last_token_usage"), dict):
                    # no running total to dedupe by
                    usages.append((line, info["last_token_usage"]))
                if isinstance(total, int):
                    last_total = total
            elif event == "user_message" and not human_prompt:
                message = payload.get("message")
                human_prompt = message if isinstance(message, str) else ""
        elif kind == "session_meta":
            payload = expect_dict(payload, "payload", line)
            if not session_meta:
                session_meta = payload
                text = instructions_text(payload)
                if text:
                    history.add(Message.of(
                        "system", text, meta={"source_line": line, "source": "instructions"}
                    ))
        elif kind == "turn_context":
            turn_lines.append(line)
            payload = expect_dict(payload, "payload", line)
            model = payload.get("model")
            if isinstance(model, str) and model not in models:
                models.append(model)
            truncation = payload.get("truncation_policy")
            policy = truncation if _is_policy(truncation) else None
        elif kind == "compacted":
            payload = expect_dict(payload, "payload", line)
            summary = payload.get("message")
            summary = summary if isinstance(summary, str) else ""
            compacted_pending = Message.of(
                "user", summary,
                meta={"source_line": line, "timestamp": timestamp, "compacted": True,
                      "compaction": _compaction_marker(summary, payload, line)},
            )
            history.add(compacted_pending)
    if session_meta.get("forked_from_id"):
        # A forked sub-agent's rollout starts with its parent's events: their `token_count`s
        # bill the parent's calls, whose items are not in this file. Its own usage starts
        # with the turn in which it first produced an item (seen in Codex Desktop 0.119).
        start = max((t for t in turn_lines if first_output is None or t < first_output),
                    default=0)
        usages = [(at, usage) for at, usage in usages if at > start]
    mapper.assign_usages([usage for _, usage in usages], codex_recorded)
    messages = codex_markers(history.messages(), boundary_lines, compacted_events)
    if not messages:
        require_sessions([], "the rollout has no conversation items")
    meta: dict[str, Any] = {
        key: session_meta[key]
        for key in ("id", "cwd", "originator", "cli_version", "source", "model_provider", "git")
        if key in session_meta
    }
    if models:
        meta["model"] = models[0]
        meta["models"] = models
    meta.update(started=first_timestamp, ended=last_timestamp)
    if window is not None:
        meta["model_context_window"] = window
    messages = as_sent(meta, messages)
    meta = with_recorded_compactions(meta, messages)
    title = request_line(human_prompt) or ""
    return [Session(
        format=NAME,
        title=title or title_from(messages, "Codex session"),
        messages=messages,
        key=str(session_meta.get("id", "")),
        meta=meta,
    )]


def _is_model_output(item: Any) -> bool:
    """An item the model produced: an assistant message, reasoning, a call."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type")
    return (kind == "message" and item.get("role") == "assistant") or kind == "reasoning" or \
        kind in CALL_TYPES or kind == "web_search_call"


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_policy(value: Any) -> bool:
    return (isinstance(value, dict) and value.get("mode") in ("bytes", "tokens")
            and isinstance(value.get("limit"), int) and not isinstance(value["limit"], bool))


def _compaction_marker(summary: str, payload: dict[str, Any], line: int) -> dict[str, Any]:
    """The `compacted` line's marker: its replacement history mapped like the rollout's own
    items (kept as message objects of the scenario shape, so the session stores as JSON)."""
    replacement = payload.get("replacement_history")
    mapped = None
    if isinstance(replacement, list):
        items = ItemMapper()
        for n, item in enumerate(replacement):
            items.add(item, {}, line, f"payload.replacement_history[{n}]")
        mapped = [message_dict(m) for m in items.history.messages()]
    return {"source": "codex", "kind": "summary", "message_present": summary != "",
            "replacement_history": mapped}
