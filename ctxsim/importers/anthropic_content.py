"""Anthropic Messages content blocks, shared by `anthropic-messages` and `claude-code`.

Text parts of one content list are concatenated with no separator (the rule the scenario
format uses for parts), images become `binary_parts` metadata with their size, `tool_use`
blocks become calls with compact JSON arguments, and `tool_result` blocks become separate
results. Thinking is kept as metadata: it is not part of the history ChatCLI-style stages see.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import ToolCall

from .common import arguments_text, binary_part, expect_dict, expect_list, optional_str
from .errors import wrong_shape


def media_part(block: dict[str, Any]) -> dict[str, Any]:
    """An `image` or `document` block as binary metadata."""
    source = block.get("source")
    kind = block.get("type")
    kind = kind if isinstance(kind, str) else "image"
    if isinstance(source, dict):
        if source.get("type") == "base64":
            return binary_part(kind, source.get("media_type", ""), source.get("data"))
        if source.get("type") == "url":
            return binary_part(kind, "", None, url=source.get("url"))
        if source.get("type") == "file":
            return binary_part(kind, "", None, file_id=source.get("file_id"))
    return binary_part(kind, "", None)


class UserContent:
    """A user message's content split into results and the remaining human-visible part."""

    __slots__ = ("texts", "binary_parts", "results")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.binary_parts: list[dict[str, Any]] = []
        # (tool_use_id, text, is_error, binary parts); an importer may replace the text by its
        # UTF-8 bytes as soon as it has split the message, to keep only those in memory.
        self.results: list[tuple[str, str | bytes, bool, list[dict[str, Any]]]] = []


def result_content(content: Any, field: str, line: int | None) -> tuple[str, list[dict]]:
    """A tool_result's `content`: a string, a list of blocks, or absent."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(expect_list(content, field, line)):
        if isinstance(block, str):
            texts.append(block)
            continue
        block = expect_dict(block, f"{field}[{index}]", line)
        kind = block.get("type")
        if kind == "text":
            texts.append(optional_str(block.get("text"), f"{field}[{index}].text", line))
        elif kind in ("image", "document"):
            parts.append(media_part(block))
        elif kind == "search_result":
            for inner in block.get("content") or ():
                if isinstance(inner, dict) and isinstance(inner.get("text"), str):
                    texts.append(inner["text"])
    return "".join(texts), parts


def split_user(content: Any, field: str, line: int | None) -> UserContent:
    split = UserContent()
    if isinstance(content, str):
        split.texts.append(content)
        return split
    if content is None:
        return split
    for index, block in enumerate(expect_list(content, field, line)):
        where = f"{field}[{index}]"
        if isinstance(block, str):
            split.texts.append(block)
            continue
        block = expect_dict(block, where, line)
        kind = block.get("type")
        if kind == "tool_result":
            tool_use_id = optional_str(block.get("tool_use_id"), f"{where}.tool_use_id", line)
            text, parts = result_content(block.get("content"), f"{where}.content", line)
            split.results.append((tool_use_id, text, block.get("is_error") is True, parts))
        elif kind == "text":
            split.texts.append(optional_str(block.get("text"), f"{where}.text", line))
        elif kind in ("image", "document"):
            split.binary_parts.append(media_part(block))
    return split


class AssistantContent:
    __slots__ = ("texts", "calls", "thinking", "server_blocks", "compaction")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.thinking: list[str] = []
        self.server_blocks = 0
        # A server compaction block (`compact_20260112`): {"content": summary or None}.
        self.compaction: dict[str, Any] | None = None


def split_assistant(content: Any, field: str, line: int | None) -> AssistantContent:
    split = AssistantContent()
    if isinstance(content, str):
        split.texts.append(content)
        return split
    if content is None:
        return split
    for index, block in enumerate(expect_list(content, field, line)):
        where = f"{field}[{index}]"
        if isinstance(block, str):
            split.texts.append(block)
            continue
        block = expect_dict(block, where, line)
        kind = block.get("type")
        if kind == "text":
            split.texts.append(optional_str(block.get("text"), f"{where}.text", line))
        elif kind == "tool_use":
            call_id = optional_str(block.get("id"), f"{where}.id", line)
            name = optional_str(block.get("name"), f"{where}.name", line)
            arguments = block.get("input")
            if arguments is not None and not isinstance(arguments, dict):
                raise wrong_shape(f"{where}.input", "an object", arguments, line=line)
            split.calls.append(ToolCall(call_id, name, arguments_text(arguments), "function"))
        elif kind == "thinking":
            split.thinking.append(optional_str(block.get("thinking"), f"{where}.thinking", line))
        elif kind == "redacted_thinking":
            split.thinking.append("")
        elif kind == "compaction":
            summary = block.get("content")
            split.compaction = {"content": summary if isinstance(summary, str) else None}
        else:
            # Server tools answer inside the same message; they are no client call/result.
            split.server_blocks += 1
    return split


def system_text(system: Any, field: str = "system") -> str:
    """Anthropic `system`: a string or a list of text blocks."""
    if system is None:
        return ""
    if isinstance(system, str):
        return system
    texts = []
    for index, block in enumerate(expect_list(system, field)):
        block = expect_dict(block, f"{field}[{index}]")
        texts.append(optional_str(block.get("text"), f"{field}[{index}].text"))
    return "".join(texts)
