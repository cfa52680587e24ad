"""Cline and Roo Code task folders (`tasks/<taskId>/`): shared by `cline` and `roo_code`.

A task is `api_conversation_history.json` (what was sent: Anthropic `MessageParam[]`, often
with `ts`) and, when it comes too, `ui_messages.json` (the chat UI log, with per-request usage)
and `task_metadata.json`. Accepted as the folder's archive (several task folders give several
sessions), the loose files uploaded together (packed into one archive by the upload page), or
`api_conversation_history.json` alone (then without usage).

Calls: native `tool_use` ↔ `tool_result` blocks; XML era (one tool per message): the first
known tool tag of the assistant text (outside `<thinking>`) is a synthetic call
`<format>-<n>` with its parameter tags as arguments, answered by the next user message when it
starts `[<tool> for '…'] Result:` / `[<tool>] Result:` / Roo's `[<tool> <other words>] Result:`
(the whole message, environment details included, is the `tool` message; `is_error` when a
block starts "The tool execution failed…", "The user denied this operation" or "[ERROR]").
Native calls answered in text blocks the same way, an extra call of a message by Cline's
"Tool [<tool>] was not executed because…" block (an error). Thinking blocks are kept as
`meta.thinking`. Recorded usage (SPEC §11): the `say: "api_req_started"`
entries of ui_messages (`tokensIn`, `tokensOut`, `cacheReads`, `cacheWrites`), the k-th request
to the assistant message it produced (by `ts` when both have it, else in order). `tokensIn`
excludes the cache for Cline and for Roo's Anthropic-style requests before 3.29.4; Roo's
`apiProtocol: "openai"` and Roo ≥ 3.29.4 include it (an Anthropic request whose `tokensIn` is
at least its cache reads and writes is read as including them [X: the files carry no
version]).

Recorded compactions (SPEC-agents §2.5.0.5): Roo's `isSummary` message gets
`meta.compaction = {"source": "roo-code", "kind": "summary", "pre_tokens", "post_tokens",
"condense_id"}` (from the matching `say: "condense_context"`), its sliding-window marker
(`isTruncationMarker`) `{"kind": "sliding_window"}`; `condenseParent` / `truncationParent`
tags are kept as `meta.condense_parent` / `meta.truncation_parent`. Cline's `summarize_task`
call is `{"source": "cline", "kind": "summary"}` on its assistant message, and the last
`conversationHistoryDeletedRange` of ui_messages is the session's `meta.deleted_range`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

from .archive import Archive, json_member
from .cline_ui import apply_ui
from .common import (
    HistoryBuilder,
    arguments_text,
    binary_part,
    compact_json,
    expect_dict,
    expect_list,
    iso_from_ms,
    items,
    obj,
    require_sessions,
)
from .errors import Near, TranscriptError, type_name
from .recorded import with_recorded_compactions
from .source import Probe, Source
from .titles import request_line

API_FILE = "api_conversation_history.json"
UI_FILE = "ui_messages.json"
META_FILE = "task_metadata.json"
TOOLS = ("read_file", "write_to_file", "replace_in_file", "apply_diff", "insert_content",
         "search_and_replace", "search_files", "list_files", "list_code_definition_names",
         "execute_command", "browser_action", "use_mcp_tool", "access_mcp_resource",
         "ask_followup_question", "attempt_completion", "new_task", "switch_mode",
         "plan_mode_respond", "act_mode_respond", "codebase_search", "update_todo_list",
         "fetch_instructions", "load_mcp_documentation", "web_fetch", "condense",
         "summarize_task", "new_rule", "report_bug", "run_slash_command", "generate_image",
         "apply_patch", "edit_file", "search_replace")
_TOOL_TAG = re.compile(r"<(" + "|".join(TOOLS) + r")>(.*?)(?:</\1>|$)", re.DOTALL)
_PARAM = re.compile(r"<([a-z_]+)>(.*?)</\1>", re.DOTALL)
_THINKING = re.compile(r"<thinking>.*?</thinking>", re.DOTALL)
# `[<tool> for '<arg>'] Result:`, `[<tool>] Result:`, and Roo's other wordings
# (`[switch_mode to 'x' because: …]`, `[new_task in 🪲 Debug mode: '…']`, `[new_task completed]`,
# seen in public tasks). The argument may hold brackets and newlines: the header ends at the
# first "] Result:".
_RESULT_HEADER = re.compile(r"\s*\[(\w+)(?: .{0,4000}?)?\] Result:", re.DOTALL)
# A result is an error when one of its blocks (after the result header) starts so: Cline's and
# Roo's `formatResponse.toolError` / `toolDenied` (cline/cline src/core/prompts/responses.ts).
# Anywhere else the words are the tool's output (a log line printing "[ERROR]").
_ERROR_STARTS = ("The tool execution failed with the following error", "The user denied this "
                 "operation", "[ERROR]")
ROO_FLAGS = ("isSummary", "condenseId", "condenseParent", "truncationId", "truncationParent",
             "isTruncationMarker", "reasoning_details")
ROO_SAYS = ("condense_context", "sliding_window_truncation", "checkpoint_saved",
            "codebase_search_result")
ROO_TOOLS = ("apply_diff", "switch_mode", "codebase_search", "update_todo_list",
             "insert_content", "search_and_replace", "fetch_instructions")
CLINE_TOOLS = ("replace_in_file", "plan_mode_respond", "act_mode_respond", "load_mcp_documentation",
               "summarize_task", "new_rule", "condense", "web_fetch")


# -- recognising a task ------------------------------------------------------------------------


def _texts(message: Any) -> list[str]:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [content]
    out = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            out.append(block["text"])
    return out


def is_api_history(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    if not all(isinstance(m, dict) and m.get("role") in ("user", "assistant") for m in value[:50]):
        return False
    return any(t.lstrip().startswith("<task>") or "<environment_details>" in t
               for m in value[:6] for t in _texts(m))


def is_ui_messages(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(m, dict) and "ts" in m and m.get("type") in ("say", "ask") for m in value[:50])


def flavour(api: list[Any], ui: list[Any] | None, names: str = "") -> str:
    """"roo-code" or "cline", from what only one of them writes (see `ROO_*`, `CLINE_*`):
    message flags, UI says, tool names, the mode line of the environment details, the
    extension's storage folder name; Cline when nothing tells."""
    roo = cline = 0
    if "rooveterinaryinc.roo-cline" in names:
        roo += 5
    if "saoudrizwan.claude-dev" in names:
        cline += 5
    for m in api[:400]:
        if not isinstance(m, dict):
            continue
        roo += sum(3 for flag in ROO_FLAGS if flag in m)
        for text in _texts(m):
            if "<slug>" in text and "# Current Mode" in text:
                roo += 2
            if "ACT MODE" in text or "PLAN MODE" in text:
                cline += 2
            for found in _TOOL_TAG.finditer(text) if m.get("role") == "assistant" else ():
                roo += found.group(1) in ROO_TOOLS
                cline += found.group(1) in CLINE_TOOLS
        for block in items(m.get("content")):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                roo += block.get("name") in ROO_TOOLS
                cline += block.get("name") in CLINE_TOOLS
    for entry in ui or ():
        if isinstance(entry, dict):
            roo += 3 * (entry.get("say") in ROO_SAYS)
            cline += 3 * ("conversationHistoryDeletedRange" in entry or
                          entry.get("say") == "checkpoint_created")
    return "roo-code" if roo > cline else "cline"


def task_folders(archive: Archive) -> list[str]:
    return sorted(posixpath.dirname(n) for n in archive.names
                  if posixpath.basename(n) == API_FILE)


def _without_history(archive: Archive, name: str) -> str:
    """Why an archive with no task history is not this format: a Near when it holds this
    agent's chat log alone."""
    logs = [n for n in archive.names if posixpath.basename(n) == UI_FILE]
    ui = json_member(archive, logs[0]) if logs else None
    if logs and flavour([], ui if isinstance(ui, list) else [], logs[0]) == name:
        return Near(f"the archive has a task's {UI_FILE} but no {API_FILE}, which holds what "
                    "was sent: archive the whole task folder", 4)
    return f"the archive has no {API_FILE}"


def detect_as(probe: Probe, name: str) -> bool | str:
    """The detection both modules share; `name` is the one asking."""
    if probe.source.archive:
        if probe.source.archive == "sqlite":
            return "an SQLite database"
        try:
            with Archive(probe.source) as archive:
                folders = task_folders(archive)
                if not folders:
                    return _without_history(archive, name)
                found = {_read_task(archive, f)[3] for f in folders[:3]}
        except TranscriptError as error:
            return str(error)
        return True if name in found or (name == "cline" and found) else \
            "the task folders are Cline's, not Roo Code's"
    if probe.is_jsonl:
        return "JSON Lines, not a task's JSON array"
    document = probe.document()
    if is_api_history(document):
        if name == "cline" or flavour(document, None) == name:
            return True
        return "the history shows nothing only Roo Code writes"
    if is_ui_messages(document) and flavour([], document) == name:
        return Near(f"this is a task's {UI_FILE} alone: upload the task folder (or {API_FILE} "
                    "with it), which holds what was sent", 4)
    if isinstance(document, list) and document and all(
            isinstance(m, dict) and "role" in m and "ts" in m for m in document[:20]):
        return Near("the messages carry `ts` like a Cline task history but no `<task>` or "
                    "`<environment_details>` text", 2)
    return f"not a task's {API_FILE} (no `<task>` / `<environment_details>` in the first messages)"


# -- mapping -----------------------------------------------------------------------------------


def _xml_call(text: str) -> tuple[str, dict[str, str]] | None:
    found = _TOOL_TAG.search(_THINKING.sub("", text))
    if found is None:
        return None
    params = {key: value.strip("\n") for key, value in _PARAM.findall(found.group(2))}
    return found.group(1), params


def _blocks(content: Any, where: str) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if content is None:
        return []
    return expect_list(content, where)


def _image(block: dict[str, Any]) -> dict[str, Any]:
    source = obj(block.get("source"))
    return binary_part("image", str(source.get("media_type") or ""), source.get("data"))


def _result_content(content: Any) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(content, str):
        return content, []
    texts, media = [], []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") == "image":
            media.append(_image(block))
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            texts.append(block["text"])
    return "\n".join(texts), media


# Cline's providers whose `inputTokens` leave the cache out (cline/cline@09692d7d3a
# src/core/api/providers: Anthropic-style APIs, and the OpenAI-style ones that subtract the
# cached tokens); the generic OpenAI-compatible ones report `prompt_tokens`, cache included.
CACHE_APART = frozenset({"anthropic", "vertex", "bedrock", "claude-code", "minimax", "aihubmix",
                         "cline", "openrouter", "vercel-ai-gateway", "deepseek", "groq",
                         "openai-native"})


def metrics_usage(item: dict[str, Any]) -> dict[str, Any] | None:
    """Newer Cline (Dec 2025 on) records each response's usage on the message itself:
    `metrics.tokens = {prompt, completion, cached}`, written as `prompt` = the provider's
    `inputTokens` and `cached` = its cache writes + cache reads (cline/cline@09692d7d3a).
    Whether `inputTokens` holds the cache depends on the provider (`modelInfo.providerId`,
    `CACHE_APART`); `cached` above `prompt` can only be apart (a public Anthropic task: prompt
    10, cached 9,573, its ui_messages 10 in and 9,573 written). Apart, the context is their
    sum and how `cached` splits into reads and writes is not recorded."""
    tokens = obj(obj(item.get("metrics")).get("tokens"))
    prompt = tokens.get("prompt")
    if not isinstance(prompt, int):
        return None
    raw_cached = tokens.get("cached")
    cached = raw_cached if isinstance(raw_cached, int) else 0
    output = tokens.get("completion") if isinstance(tokens.get("completion"), int) else None
    if str(obj(item.get("modelInfo")).get("providerId")) in CACHE_APART or cached > prompt:
        return {"total_input": prompt + cached, "input": prompt, "cache_read": None,
                "cache_write": None, "output": output, "reasoning": None}
    return {"total_input": prompt, "input": prompt - cached, "cache_read": cached or None,
            "cache_write": None, "output": output, "reasoning": None}


# Cline's answer to each extra call of a message (`formatResponse.toolAlreadyUsed`): a block
# of its own, the refused call's result.
_NOT_EXECUTED = re.compile(r"\s*Tool \[(\w+)\] was not executed because")


def _after_header(text: str) -> str:
    header = _RESULT_HEADER.match(text)
    return text[header.end():] if header else text


def _text_results(blocks: list[tuple[str, Any]], pending: list[ToolCall], meta: dict[str, Any]
                  ) -> tuple[list[Message], list[tuple[str, Any]]]:
    """Results written as text (`[<tool> for '…'] Result:` blocks, XML era and Cline's native
    calls alike): each header block starts the result of the next pending call (of that tool
    when one waits), the blocks after it belong to it. Returns the results and the blocks
    before the first header (a plain user message)."""
    results: list[tuple[ToolCall, list[tuple[str, Any]]]] = []
    lead: list[tuple[str, Any]] = []
    waiting = list(pending)
    for kind, value in blocks:
        header = (_RESULT_HEADER.match(value) or _NOT_EXECUTED.match(value)) if kind == "text" \
            else None
        if header is not None and waiting:
            call = next((c for c in waiting if c.name == header.group(1)), waiting[0])
            waiting.remove(call)
            results.append((call, [(kind, value)]))
        elif results:
            results[-1][1].append((kind, value))
        else:
            lead.append((kind, value))
    out = []
    for call, group in results:
        text = "\n\n".join(v for k, v in group if k == "text")
        media = [v for k, v in group if k == "image"]
        out.append(Message.of("tool", text, tool_call_id=call.id,
                              is_error=any(_after_header(v).lstrip().startswith(_ERROR_STARTS)
                                           or _NOT_EXECUTED.match(v) is not None
                                           for k, v in group if k == "text"),
                              meta={**meta, **({"binary_parts": media} if media else {})}))
    return out, lead


def map_history(api: list[Any], name: str) -> list[Message]:
    history = HistoryBuilder()
    pending: list[ToolCall] = []  # calls of the last assistant message, not answered yet
    synthetic = 0
    for index, item in enumerate(api):
        where = f"{API_FILE}[{index}]"
        item = expect_dict(item, where)
        role = item.get("role")
        meta: dict[str, Any] = {"history_index": index}
        if isinstance(item.get("ts"), (int, float)):
            meta["ts"] = item["ts"]
        for flag, key in (("condenseParent", "condense_parent"),
                          ("truncationParent", "truncation_parent")):
            if item.get(flag) is not None:
                meta[key] = item[flag]
        if item.get("isSummary"):
            meta["compaction"] = {"source": "roo-code", "kind": "summary",
                                  "condense_id": item.get("condenseId")}
            meta["compact_summary"] = True
        elif item.get("isTruncationMarker"):
            meta["compaction"] = {"source": "roo-code", "kind": "sliding_window",
                                  "truncation_id": item.get("truncationId")}
        blocks: list[tuple[str, Any]] = []  # ("text", str) / ("image", binary part)
        results: list[Message] = []
        calls: list[ToolCall] = []
        for number, block in enumerate(_blocks(item.get("content"), f"{where}.content")):
            block = expect_dict(block, f"{where}.content[{number}]")
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                blocks.append(("text", block["text"]))
            elif kind == "image":
                blocks.append(("image", _image(block)))
            elif kind in ("thinking", "redacted_thinking"):
                # Kept as the Anthropic importers keep it (`clear_thinking` reads it).
                meta.setdefault("thinking", []).append(
                    block.get("thinking") if isinstance(block.get("thinking"), str) else "")
            elif kind == "tool_use":
                calls.append(ToolCall(str(block.get("id") or ""), str(block.get("name") or ""),
                                      arguments_text(block.get("input"))))
            elif kind == "tool_result":
                output, parts = _result_content(block.get("content"))
                results.append(Message.of(
                    "tool", output, tool_call_id=str(block.get("tool_use_id") or ""),
                    is_error=block.get("is_error") is True,
                    meta={"history_index": index, **({"binary_parts": parts} if parts else {})}))
        if role == "assistant":
            text = "\n\n".join(v for k, v in blocks if k == "text")
            if not calls and (xml := _xml_call(text)) is not None:
                synthetic += 1
                calls = [ToolCall(f"{name}-{synthetic}", xml[0], compact_json(xml[1]))]
            pending = list(calls)
            if any(c.name == "summarize_task" for c in calls):
                meta["compaction"] = {"source": "cline", "kind": "summary"}
            if (recorded := metrics_usage(item)) is not None:
                meta["recorded"] = recorded
            if isinstance(obj(item.get("modelInfo")).get("modelId"), str):
                meta["model"] = item["modelInfo"]["modelId"]
            history.close()
            draft = history.assistant(None, meta)
            draft.texts.append(text)
            for call in calls:
                draft.add_call(call)
            history.close()
            continue
        answered = {r.tool_call_id for r in results}
        text_results, lead = _text_results(
            blocks, [c for c in pending if c.id not in answered], meta)
        for result in (*results, *text_results):
            history.add(result)
        if lead or not (results or text_results):
            media = [v for k, v in lead if k == "image"]
            history.add(Message.of("user", "\n\n".join(v for k, v in lead if k == "text"),
                                   meta={**meta, **({"binary_parts": media} if media else {})}))
        pending = []
    return list(history.messages())


# -- sessions ----------------------------------------------------------------------------------


def _read_task(archive: Archive, folder: str) -> tuple[list[Any], list[Any] | None, Any, str]:
    def member(leaf: str) -> str:
        return posixpath.join(folder, leaf) if folder else leaf

    api = json_member(archive, member(API_FILE))
    if not isinstance(api, list):
        raise TranscriptError(f"{member(API_FILE)}: should be a JSON array of messages, "
                              f"not {type_name(api)}")
    ui = json_member(archive, member(UI_FILE)) if member(UI_FILE) in archive.names else None
    if ui is not None and not isinstance(ui, list):
        raise TranscriptError(f"{member(UI_FILE)}: should be a JSON array, not {type_name(ui)}")
    extra = json_member(archive, member(META_FILE)) if member(META_FILE) in archive.names \
        else None
    return api, ui, extra, flavour(api, ui, folder)


def build(api: list[Any], ui: list[Any] | None, task_meta: Any, name: str, key: str,
          label: str) -> Session:
    try:
        messages = map_history(api, name)
    except TranscriptError as error:
        raise TranscriptError(f"{label}: {error.reason}") from None
    meta: dict[str, Any] = {"task_id": key}
    times = [m.meta["ts"] for m in messages if isinstance(m.meta.get("ts"), (int, float))]
    if times:
        meta.update(started=iso_from_ms(min(times)), ended=iso_from_ms(max(times)))
    if ui is not None:
        messages, ui_meta = apply_ui(messages, ui)
        meta.update(ui_meta)
    if isinstance(task_meta, dict) and isinstance(task_meta.get("model_usage"), list):
        models = [u.get("model_id") for u in task_meta["model_usage"] if isinstance(u, dict)]
        if models and isinstance(models[-1], str):
            meta["model"] = models[-1]
    require_sessions(messages, f"{label}: the task history is empty")
    task = next((t for m in api[:1] for t in _texts(m) if "<task>" in t), "")
    title = request_line(task.replace("<task>", "").replace("</task>", "")) or \
        f"{label} task {key}"
    return Session(format=name, title=title, messages=tuple(messages), key=key,
                   meta=with_recorded_compactions(meta, messages))


def parse_as(source: Source, name: str, label: str) -> list[Session]:
    if not source.archive:
        document = source.document()
        if not isinstance(document, list):
            raise TranscriptError(f"{label}: {API_FILE} should be a JSON array of messages, "
                                  f"not {type_name(document)}")
        return [build(document, None, None, name, "task", label)]
    with Archive(source) as archive:
        folders = task_folders(archive)
        tasks = [(folder, _read_task(archive, folder)) for folder in folders]
    sessions = [build(api, ui, extra, name, posixpath.basename(folder) or "task", label)
                for folder, (api, ui, extra, _) in tasks]
    return require_sessions(sessions, f"the archive has no {API_FILE}")
