"""OpenAI Responses API items, shared by `openai-responses`, `codex` and `codex-legacy`.

Consecutive output items (reasoning, assistant message, calls) are one model response, so
they become one assistant message; an input item (a user or system message, a call output)
ends the response. Calls are `function_call`, `custom_tool_call` and `local_shell_call`;
their `*_output` items are the results, linked by `call_id` (not the item `id`). Hosted tools
(web search, ...) answer inside their own item and are neither calls nor results here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ctxsim.pipeline.messages import Message, ToolCall

from .common import (
    AssistantDraft,
    HistoryBuilder,
    Names,
    arguments_text,
    binary_part,
    compact_json,
    data_url_part,
    expect_dict,
    optional_str,
)
from .errors import TranscriptError, type_name

CALL_TYPES = Names({"function_call", "custom_tool_call", "local_shell_call"})
OUTPUT_TYPES = Names({
    "function_call_output", "custom_tool_call_output", "local_shell_call_output",
})
# Items the Responses API documents; detection accepts a bare list of these.
ITEM_TYPES = Names(CALL_TYPES | OUTPUT_TYPES | {
    "message", "reasoning", "web_search_call", "file_search_call", "code_interpreter_call",
    "image_generation_call", "computer_call", "computer_call_output", "mcp_call",
    "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "item_reference",
})
SKIPPED_TYPES = Names({"ghost_snapshot", "item_reference"})
# Remote compaction output (`compaction_summary` is its serde alias): an opaque item the
# client sends back in place of the history it replaced.
COMPACTION_TYPES = Names({"compaction", "compaction_summary"})
ROLE_MAP = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _content_text(content: Any, field: str, line: int | None) -> tuple[str, list[dict]]:
    """A message's content: a string or a list of input/output parts."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise TranscriptError(
            f"`{field}` should be a string or a list of parts, not {type_name(content)}",
            line=line,
        )
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        part = expect_dict(part, f"{field}[{index}]", line)
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            texts.append(optional_str(part.get("text"), f"{field}[{index}].text", line))
        elif kind == "refusal":
            texts.append(optional_str(part.get("refusal"), f"{field}[{index}].refusal", line))
        elif kind == "input_image":
            url = part.get("image_url")
            detail = part.get("detail") if isinstance(part.get("detail"), str) else None
            if isinstance(url, str):
                parts.append(data_url_part("image", url, detail=detail))
            else:
                parts.append(binary_part("image", "", None, file_id=part.get("file_id")))
        elif kind == "input_file":
            parts.append(binary_part(
                "file", "", part.get("file_data"), filename=part.get("filename")
            ))
    return "".join(texts), parts


def _output_text(output: Any, field: str, line: int | None) -> tuple[str, list[dict]]:
    if isinstance(output, (str, list)) or output is None:
        return _content_text(output, field, line)
    return compact_json(output), []


def _shell_failure(output: str) -> str:
    """Codex shell output is JSON with metadata.exit_code; a non-zero code marks an error."""
    if not output.startswith('{"output"'):
        return ""
    try:
        metadata = json.loads(output).get("metadata") or {}
    except (ValueError, AttributeError):
        return ""
    code = metadata.get("exit_code") if isinstance(metadata, dict) else None
    if isinstance(code, int) and code != 0:
        return f"ExitCode:{code}"
    return ""


class ItemMapper:
    """Feeds Responses items, in order, into a history."""

    def __init__(self, history: HistoryBuilder | None = None):
        self.history = history or HistoryBuilder()
        self._response = 0

    def _assistant(self, meta: dict[str, Any]) -> AssistantDraft:
        draft = self.history.open_assistant
        if draft is None:
            self._response += 1
            draft = self.history.assistant(("response", self._response), dict(meta))
        return draft

    def add(
        self, item: Any, meta: dict[str, Any], line: int | None = None, field: str = "item"
    ) -> None:
        """Map one item; `meta` (source line, timestamp) goes on the message it starts."""
        item = expect_dict(item, field, line)
        kind = item.get("type")
        if kind is None and "role" in item:
            kind = "message"  # "easy" input messages carry no type
        if kind == "message":
            self._message(item, meta, line)
        elif kind in CALL_TYPES:
            self._assistant(meta).add_call(self._call(kind, item, line))
        elif kind in OUTPUT_TYPES:
            self._output(kind, item, meta, line)
        elif kind == "reasoning":
            draft = self._assistant(meta)
            draft.meta["reasoning_items"] = draft.meta.get("reasoning_items", 0) + 1
            summary, _ = _content_text(item.get("summary"), "summary", line)
            if summary:
                draft.meta.setdefault("reasoning", []).append(summary)
            encrypted = item.get("encrypted_content")
            if isinstance(encrypted, str):
                draft.meta["reasoning_encrypted_chars"] = (
                    draft.meta.get("reasoning_encrypted_chars", 0) + len(encrypted)
                )
        elif kind in COMPACTION_TYPES:
            self._compaction(item, meta)
        elif kind in SKIPPED_TYPES or not isinstance(kind, str):
            return
        else:
            # Hosted tool items: the model's own action, answered inside the item.
            draft = self._assistant(meta)
            draft.meta.setdefault("hosted_calls", []).append(kind)

    def _message(self, item: dict[str, Any], meta: dict[str, Any], line: int | None) -> None:
        role = item.get("role")
        if not isinstance(role, str) or role not in ROLE_MAP:
            raise TranscriptError(
                f"`role` of a message item should be user, assistant, system or developer, "
                f"not {role!r}",
                line=line,
            )
        text, parts = _content_text(item.get("content"), "content", line)
        if ROLE_MAP[role] == "assistant":
            draft = self._assistant(meta)
            draft.texts.append(text)
            return
        message_meta = dict(meta)
        if role == "developer":
            message_meta["source_role"] = "developer"
        if parts:
            message_meta["binary_parts"] = parts
        if role == "user" and text.lstrip().startswith(("<environment_context>",
                                                       "<user_instructions>")):
            # Codex injects these as user items; they are context, not the human's prompt.
            message_meta["injected"] = True
        self.history.add(Message.of(ROLE_MAP[role], text, meta=message_meta))

    def _compaction(self, item: dict[str, Any], meta: dict[str, Any]) -> None:
        """SPEC-agents §2.5.0.5: an empty user message costing ⌈len(encrypted)/4⌉ tokens."""
        encrypted = item.get("encrypted_content")
        size = len(encrypted) if isinstance(encrypted, str) else 0
        self.history.add(Message.of("user", "", meta={
            **meta, "kind": "codex_compaction_item",
            "binary_parts": [{"type": "encrypted_compaction", "base64_length": size}],
        }))

    def _call(self, kind: str, item: dict[str, Any], line: int | None) -> ToolCall:
        call_id = item.get("call_id")
        if not isinstance(call_id, str):
            call_id = optional_str(item.get("id"), "call_id", line)
        if kind == "function_call":
            name = optional_str(item.get("name"), "name", line)
            return ToolCall(call_id, name, arguments_text(item.get("arguments")), "function")
        if kind == "custom_tool_call":
            name = optional_str(item.get("name"), "name", line)
            return ToolCall(call_id, name, arguments_text(item.get("input")), "custom")
        return ToolCall(call_id, "local_shell", arguments_text(item.get("action")), "local_shell")

    def _output(self, kind: str, item: dict, meta: dict[str, Any], line: int | None) -> None:
        call_id = optional_str(item.get("call_id"), "call_id", line)
        text, parts = _output_text(item.get("output"), "output", line)
        message_meta = dict(meta, binary_parts=parts) if parts else dict(meta)
        error_code = _shell_failure(text) if kind == "function_call_output" else ""
        self.history.add(Message.of(
            "tool", text, tool_call_id=call_id, is_error=bool(error_code),
            error_code=error_code, meta=message_meta,
        ))
        # The next output item answers a new model call, made after this result.
        self.history.close()

    def assign_usages(self, usages: list[Any], normalize: Callable[[Any], Any]) -> None:
        """Give the k-th response's usage to the k-th assistant message (SPEC §11: by count,
        never by position); a message past the last usage (the session was cut) gets none.

        A message holding reasoning items also gets `reasoning_tokens`, the response's
        recorded reasoning: Codex sends those items back, billed as input, for the rest of
        the user turn.
        """
        drafts = [item for item in self.history.items if isinstance(item, AssistantDraft)]
        for draft, usage in zip(drafts, usages, strict=False):
            if not isinstance(usage, dict):
                continue
            draft.meta["usage"] = usage
            recorded = normalize(usage)
            if recorded is None:
                continue
            draft.meta["recorded"] = recorded
            if recorded.get("reasoning") and (
                draft.meta.get("reasoning") or draft.meta.get("reasoning_encrypted_chars")
                or draft.meta.get("reasoning_items")
            ):
                draft.meta["reasoning_tokens"] = recorded["reasoning"]
