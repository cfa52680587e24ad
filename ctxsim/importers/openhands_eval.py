"""OpenHands evaluation output (`output.jsonl`): one task instance per line, each its own
session, with `history` holding the instance's events (mapped as in `openhands`).

An instance that failed before its first step has `history: null` (or no history); it stays a
session, holding the task `instruction` when there is one."""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session

from .common import expect_list, require_sessions, title_from
from .errors import TranscriptError, type_name
from .openhands import map_events
from .recorded import with_recorded_compactions
from .source import Probe, Source

NAME = "openhands-eval"


def detect(probe: Probe) -> bool | str:
    first = probe.first_record
    if isinstance(first, dict) and "instance_id" in first and "history" in first:
        return True
    return "the first line is not an object with `instance_id` and `history`"


def parse(source: Source) -> list[Session]:
    sessions = []
    counter = [0]
    for line, record in source.records():
        if not isinstance(record, dict):
            raise TranscriptError(
                f"each line should be a JSON object, not {type_name(record)}", line=line
            )
        history = record.get("history")
        history = [] if history is None else expect_list(history, "history", line)
        metrics = record.get("metrics")
        token_usages = metrics.get("token_usages") if isinstance(metrics, dict) else None
        try:
            messages, tools = map_events(history, counter, NAME, "history", token_usages)
        except TranscriptError as error:
            raise TranscriptError(error.reason, line=line) from None
        instruction = record.get("instruction")
        if not messages and isinstance(instruction, str) and instruction:
            messages = (Message.of("user", instruction, meta={"source": "instruction"}),)
        instance = str(record.get("instance_id", ""))
        meta: dict[str, Any] = {"instance_id": instance, "source_line": line}
        if isinstance(metrics, dict):
            meta["metrics"] = {
                key: metrics[key]
                for key in ("accumulated_cost", "accumulated_token_usage")
                if key in metrics
            }
        metadata = record.get("metadata")
        if isinstance(metadata, dict):
            if isinstance(metadata.get("agent_class"), str):
                meta["agent_class"] = metadata["agent_class"]
            llm = metadata.get("llm_config")
            if isinstance(llm, dict) and isinstance(llm.get("model"), str):
                meta["model"] = llm["model"]
        if record.get("error"):
            meta["error"] = str(record["error"])
        sessions.append(Session(
            format=NAME,
            title=f"{instance}: " + title_from(messages, "OpenHands task") if instance
            else title_from(messages, "OpenHands task"),
            messages=messages, tools=tools, key=instance or f"line-{line}",
            meta=with_recorded_compactions(meta, messages),
        ))
    return require_sessions(sessions, "the file has no instances")
