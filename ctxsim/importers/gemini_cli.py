"""Gemini CLI session files, legacy era (≤ 0.38): one pretty JSON object per session,
`{sessionId, projectHash, startTime, lastUpdated, messages[]}`, rewritten on every update.

Mapping (shared with `gemini_cli_jsonl`):
- `user` records are user messages (`content` a string or Gemini parts; `inlineData` parts
  are kept as binary metadata). A user record made only of `functionResponse` parts (newer
  recorders also log the tool responses so) repeats results the calls already hold: skipped.
- One `gemini` record is one model response: an assistant message with its text (thought
  parts left out), one call per `toolCalls[]` entry (`id`, `name`, `args`), then one `tool`
  message per call that has an outcome (`result` parts or a final `status`):
  `functionResponse.response.output` (or `.error`, then `is_error`), status `error` /
  `cancelled` kept as `is_error` / `meta.status`.
- `info` / `error` / `warning` records are UI notes the model never sees: left out (the
  compression notice "Context compressed from …" is kept on the next compaction marker).
- Recorded usage (SPEC §11) is the record's `tokens` (the response's `usageMetadata`):
  `total_input` = `input` (it includes `cached`), `cache_read` = `cached`, `output`,
  `reasoning` = `thoughts`. The legacy recorder never wrote a compression.

The files record no CLI version; the session keeps `startTime` (`started`) for the era.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .common import (
    HistoryBuilder,
    binary_part,
    compact_json,
    expect_dict,
    expect_list,
    items,
    require_sessions,
    title_from,
)
from .errors import Near, TranscriptError, type_name
from .source import Probe, Source

NAME = "gemini-cli"
LABEL = "Gemini CLI"
FINAL_STATUSES = ("success", "error", "cancelled")
UI_TYPES = ("info", "error", "warning")


def is_session_meta(value: Any) -> bool:
    return isinstance(value, dict) and "sessionId" in value and "projectHash" in value


# Gemini CLI's headless output (`-p`, transcript-formats-2 §1c) is no session file; the same
# run writes one.
HEADLESS = "upload the session file the run wrote (~/.gemini/tmp/<project>/chats/)"


def detect(probe: Probe) -> bool | str:
    if probe.is_jsonl:
        return "JSON Lines (the JSONL recorder is gemini-cli-jsonl)"
    document = probe.document()
    if is_session_meta(document):
        return True
    if isinstance(document, dict) and "sessionId" in document and \
            isinstance(document.get("messages"), list):
        return Near("the object has `sessionId` and `messages` but no `projectHash`", 2)
    if isinstance(document, dict) and "session_id" in document and any(
            key in document for key in ("response", "stats", "error")):
        return Near(f"this is `gemini -p` output (json), not a session: {HEADLESS}", 3)
    return "no `sessionId` + `projectHash` object"


def parts_of(content: Any, where: str) -> list[Any]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list):
        return content
    raise TranscriptError(f"{LABEL}: `{where}` should be text or a list of parts, "
                          f"not {type_name(content)}")


def text_and_media(parts: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    texts: list[str] = []
    media: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict) or part.get("thought") is True:
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        inline = part.get("inlineData") or part.get("inline_data")
        if isinstance(inline, dict):
            mime = inline.get("mimeType") or inline.get("mime_type") or ""
            kind = "image" if str(mime).startswith("image/") else "file"
            media.append(binary_part(kind, str(mime), inline.get("data")))
    return "".join(texts), media


def only_function_responses(parts: list[Any]) -> bool:
    return bool(parts) and all(isinstance(p, dict) and "functionResponse" in p for p in parts)


def recorded_tokens(tokens: Any) -> dict[str, Any] | None:
    """`tokens` of a response; `null` or `input: 0` (a response cut off before its usage was
    reported, observed) is no recorded usage rather than a prompt of 0 tokens."""
    if not isinstance(tokens, dict) or not isinstance(tokens.get("input"), int) \
            or isinstance(tokens["input"], bool) or tokens["input"] <= 0:
        return None
    cached = tokens.get("cached") if isinstance(tokens.get("cached"), int) else None
    return {"total_input": tokens["input"], "input": tokens["input"] - (cached or 0),
            "cache_read": cached, "cache_write": None,
            "output": tokens.get("output") if isinstance(tokens.get("output"), int) else None,
            "reasoning": tokens.get("thoughts") if isinstance(tokens.get("thoughts"), int)
            else None}


def result_text(call: dict[str, Any]) -> tuple[str, bool]:
    """A call's result as the model saw it, and whether it was an error.

    A batch of parallel calls may record the whole batch's responses in each call's `result`
    (seen in a 2026 session): only the parts of this call's `functionResponse` (`id` equal to
    the call's) are its result, with the text parts that follow it (`read_many_files` adds its
    files so). A result whose responses carry no such id is taken whole."""
    texts: list[str] = []
    error = call.get("status") == "error"
    parts = [p for p in items(call.get("result")) if isinstance(p, dict)]
    own = call.get("id")
    ids = {r["id"] for p in parts
           if isinstance(r := p.get("functionResponse"), dict) and isinstance(r.get("id"), str)}
    mine = own if isinstance(own, str) and own in ids else None
    current = None  # the id of the latest functionResponse: the text parts after it are its
    for part in parts:
        response = part.get("functionResponse")
        if isinstance(response, dict):
            current = response.get("id")
        if mine is not None and current is not None and current != mine:
            continue
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and (isinstance(body.get("output"), str)
                                           or "error" in body):
                if isinstance(body.get("output"), str):
                    texts.append(body["output"])
                if "error" in body:
                    error = True
                    texts.append(body["error"] if isinstance(body["error"], str)
                                 else compact_json(body["error"]))
            elif body is not None:
                texts.append(compact_json(body))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(texts), error


def map_records(records: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[Message]:
    """(record, meta) pairs in history order → canonical messages."""
    history = HistoryBuilder()
    for record, meta in records:
        kind = record.get("type")
        where = meta.get("where", "messages")
        if kind in UI_TYPES:
            continue
        parts = parts_of(record.get("content"), f"{where}.content")
        text, media = text_and_media(parts)
        meta = {k: v for k, v in meta.items() if k != "where"}
        if isinstance(record.get("id"), str):
            meta["record_id"] = record["id"]
        if isinstance(record.get("timestamp"), str):
            meta["timestamp"] = record["timestamp"]
        if media:
            meta["binary_parts"] = media
        if kind == "user":
            if only_function_responses(parts):
                continue
            if isinstance(record.get("displayContent"), (str, list)):
                meta["display_content"] = text_and_media(
                    parts_of(record["displayContent"], f"{where}.displayContent"))[0]
            history.add(Message.of("user", text, meta=meta))
            continue
        if kind != "gemini":
            raise TranscriptError(f"{LABEL}: `{where}.type` {kind!r} is not user, gemini, "
                                  "info, error or warning")
        recorded = recorded_tokens(record.get("tokens"))
        if recorded is not None:
            meta["recorded"] = recorded
        if isinstance(record.get("model"), str):
            meta["model"] = record["model"]
        calls = record.get("toolCalls")
        calls = expect_list(calls, f"{where}.toolCalls") if calls is not None else []
        history.close()
        draft = history.assistant(None, meta)
        draft.texts.append(text)
        answered: list[tuple[str, dict[str, Any]]] = []
        for number, call in enumerate(calls):
            call = expect_dict(call, f"{where}.toolCalls[{number}]")
            call_id = str(call.get("id") or f"{NAME}-{meta.get('record_id')}-{number}")
            draft.add_call(ToolCall(call_id, str(call.get("name") or ""),
                                    compact_json(call.get("args", {}))))
            if call.get("result") is not None or call.get("status") in FINAL_STATUSES:
                answered.append((call_id, call))
        for call_id, call in answered:
            output, error = result_text(call)
            tool_meta: dict[str, Any] = {"record_id": meta.get("record_id")}
            if isinstance(call.get("status"), str):
                tool_meta["status"] = call["status"]
            history.add(Message.of("tool", output, tool_call_id=call_id,
                                   is_error=error or call.get("status") == "cancelled",
                                   meta=tool_meta))
        history.close()
    return list(history.messages())


def session_meta(header: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"session_id": header.get("sessionId"),
                            "project_hash": header.get("projectHash")}
    for key, out in (("startTime", "started"), ("lastUpdated", "ended"), ("kind", "kind"),
                     ("summary", "summary")):
        if key in header:
            meta[out] = header[key]
    return meta


def build_session(name: str, header: dict[str, Any], messages: list[Message],
                  extra: dict[str, Any] | None = None) -> Session:
    require_sessions(messages, "the session has no user or model messages")
    meta = session_meta(header)
    models = [m.meta["model"] for m in messages if isinstance(m.meta.get("model"), str)]
    if models:
        meta["model"] = models[0]
    meta.update(extra or {})
    return Session(format=name, title=title_from(messages, f"{LABEL} session"),
                   messages=tuple(messages), key=str(header.get("sessionId") or ""),
                   parent_key=None, meta=meta)


def parse(source: Source) -> list[Session]:
    document = source.document()
    if not isinstance(document, dict):
        raise TranscriptError(f"a {LABEL} session should be a JSON object, "
                              f"not {type_name(document)}")
    raw = expect_list(document.get("messages"), "messages")
    records = [(expect_dict(item, f"messages[{i}]"), {"where": f"messages[{i}]"})
               for i, item in enumerate(raw)]
    return [build_session(NAME, document, map_records(records))]
