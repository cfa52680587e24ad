"""Codex CLI rollout JSONL, CLI 0.40 and later: `{"timestamp","type","payload"}` per line.

Only `response_item` lines are conversation (the `event_msg` lines repeat them for the UI);
`event_msg/token_count` gives each request's usage (`last_token_usage`, not the cumulative
total). The session's `instructions` become a leading system message (SPEC §7).
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session

from .common import HistoryBuilder, Names, expect_dict, require_sessions, title_from
from .errors import TranscriptError, type_name
from .responses_items import ItemMapper
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
            mapper.add(payload, {"source_line": line, "timestamp": timestamp}, line, "payload")
        elif kind == "event_msg":
            payload = expect_dict(payload, "payload", line)
            event = payload.get("type")
            if event == "token_count" and isinstance(payload.get("info"), dict):
                usage = payload["info"].get("last_token_usage")
                if usage is not None:
                    mapper.attach_usage(usage)
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
            payload = expect_dict(payload, "payload", line)
            model = payload.get("model")
            if isinstance(model, str) and model not in models:
                models.append(model)
        elif kind == "compacted":
            payload = expect_dict(payload, "payload", line)
            summary = payload.get("message")
            history.add(Message.of(
                "user", summary if isinstance(summary, str) else "",
                meta={"source_line": line, "timestamp": timestamp, "compacted": True},
            ))
    messages = history.messages()
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
    title = request_line(human_prompt) or ""
    return [Session(
        format=NAME,
        title=title or title_from(messages, "Codex session"),
        messages=messages,
        key=str(session_meta.get("id", "")),
        meta=meta,
    )]
