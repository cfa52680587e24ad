"""OpenHands V1 evaluation output (OpenHands/benchmarks `output.jsonl`): one task instance per
line, `{instance_id, instruction, history: [V1 events], metrics, metadata, error, …}`, each
its own session, the events mapped as in `openhands_v1`. Eval histories usually leave out the
system prompt and the task message: the line's `instruction` then leads the session. Usage:
`metrics.token_usages` matched by `llm_response_id`."""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Session

from .common import expect_list, obj, require_sessions
from .errors import Near, TranscriptError, type_name
from .openhands_v1 import _session, find_token_usages, is_event
from .source import Probe, Source

NAME = "openhands-v1-eval"


def detect(probe: Probe) -> bool | str:
    first = probe.first_record
    if not (isinstance(first, dict) and "instance_id" in first and "history" in first):
        return "the first line is not an object with `instance_id` and `history`"
    history = first.get("history")
    if isinstance(history, list) and any(is_event(e) for e in history[:20]):
        return True
    if isinstance(history, list) and history and all(isinstance(e, dict) and "kind" in e
                                                     for e in history[:20]):
        return Near("`history` items have `kind` but none is a V1 event kind", 1)
    return "`history` holds no V1 events (`kind` …Event)"


def parse(source: Source) -> list[Session]:
    sessions = []
    for line, record in source.records():
        if not isinstance(record, dict):
            raise TranscriptError(f"each line should be a JSON object, not {type_name(record)}",
                                  line=line)
        history = record.get("history")
        history = [] if history is None else expect_list(history, "history", line)
        instance = str(record.get("instance_id", ""))
        meta: dict[str, Any] = {"instance_id": instance, "source_line": line, "format": NAME}
        metadata = obj(record.get("metadata"))
        llm = obj(metadata.get("llm"))
        if isinstance(llm.get("model"), str):
            meta["model"] = llm["model"]
        versions = {k: v for k, v in metadata.items() if k.endswith("version")
                    and isinstance(v, str)}
        if versions:
            meta["versions"] = versions
            meta["agent_version"] = next(iter(versions.values()))
        if record.get("error"):
            meta["error"] = str(record["error"])
        instruction = record.get("instruction")
        try:
            session = _session(history, instance or f"line-{line}", "history", meta,
                               find_token_usages(record.get("metrics")),
                               instruction if isinstance(instruction, str) else "")
        except TranscriptError as error:
            raise TranscriptError(error.reason, line=line) from None
        if instance:
            session = Session(format=NAME, title=f"{instance}: {session.title}",
                              messages=session.messages, tools=session.tools, key=session.key,
                              meta=session.meta)
        sessions.append(session)
    return require_sessions(sessions, "the file has no instances")
