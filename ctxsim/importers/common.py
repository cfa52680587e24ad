"""Building blocks every importer shares: JSON text of arguments, binary parts, shape checks,
and the history builder that keeps "one assistant message per model call" (SPEC §1).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from ctxsim.pipeline.images import base64_image_size
from ctxsim.pipeline.messages import Message, ToolCall

from .errors import TranscriptError, wrong_shape
from .titles import request_line


class Names(frozenset):
    """A set of names that answers `in` for any parsed JSON value: a list or an object where
    a name was expected is simply not a member (a plain set would raise TypeError)."""

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and frozenset.__contains__(self, value)


def compact_json(value: Any) -> str:
    """The compact JSON the token formula and the scenario format use (keys in source order)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def arguments_text(value: Any) -> str:
    """A call's arguments as a JSON string: strings verbatim (even when not valid JSON),
    objects serialized compactly, null or absent as ""."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return compact_json(value)


def base64_size(data: str) -> int:
    """Decoded size of base64 text without decoding it (padding and whitespace discounted)."""
    length = len(data) - data.count("\n") - data.count("\r")
    padding = 2 if data.endswith("==") else 1 if data.endswith("=") else 0
    return max(0, length * 3 // 4 - padding)


def binary_part(kind: str, media_type: str, data: str | None, **extra: Any) -> dict[str, Any]:
    """Metadata kept for an image or other binary part: its size, never its bytes."""
    data = data if isinstance(data, str) else ""
    part = {
        "type": kind,
        "media_type": media_type if isinstance(media_type, str) else "",
        "base64_length": len(data),
        "bytes": base64_size(data),
    }
    part.update({key: value for key, value in extra.items() if value is not None})
    if kind == "image" and data:
        # The bytes are not kept, so the provider rules (SPEC §11) need the size now.
        size = base64_image_size(data)
        if size is None:
            part["unreadable"] = True
        else:
            part["width"], part["height"] = size
    return part


def data_url_part(kind: str, url: str, **extra: Any) -> dict[str, Any]:
    """A `data:<type>;base64,<data>` URL as binary metadata; other URLs keep only the URL."""
    if url.startswith("data:") and "," in url:
        header, data = url.split(",", 1)
        media_type = header[5:].split(";", 1)[0]
        return binary_part(kind, media_type, data, **extra)
    return binary_part(kind, "", None, url=url[:2000], **extra)


def obj(value: Any) -> dict[str, Any]:
    """An optional object field: the object, or {} for anything else (absent, null, a list)."""
    return value if isinstance(value, dict) else {}


def iso_from_ms(value: Any) -> str | None:
    """An epoch-milliseconds timestamp (Cline, Roo Code, OpenCode) as ISO 8601 UTC."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        return None
    try:
        moment = datetime.fromtimestamp(value / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def items(value: Any) -> list[Any]:
    """An optional list field: the list, or [] for anything else."""
    return value if isinstance(value, list) else []


def expect_dict(value: Any, field: str, line: int | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise wrong_shape(field, "an object", value, line=line)
    return value


def expect_list(value: Any, field: str, line: int | None = None) -> list[Any]:
    if not isinstance(value, list):
        raise wrong_shape(field, "a list", value, line=line)
    return value


def expect_str(value: Any, field: str, line: int | None = None) -> str:
    if not isinstance(value, str):
        raise wrong_shape(field, "a string", value, line=line)
    return value


def optional_str(value: Any, field: str, line: int | None = None) -> str:
    """A string field that may be absent or null (then "")."""
    if value is None:
        return ""
    return expect_str(value, field, line)


def title_from(messages: tuple[Message, ...] | list[Message], fallback: str,
               project: str = "") -> str:
    """The first real user request's first line, shortened: what a user recognizes a session
    by (agent boilerplate such as command wrappers and IDE context is skipped; see `titles`).
    `project` goes into a slash command's title ("Initialise CLAUDE.md: shop")."""
    for message in messages:
        if message.role == "user" and not message.meta.get("injected") and message.content:
            line = request_line(message.text, project)
            if line:
                return line
    return fallback


class AssistantDraft:
    """An assistant message being assembled from several source records of one response."""

    __slots__ = ("key", "texts", "calls", "call_ids", "meta", "origin")

    def __init__(self, key: Any, meta: dict[str, Any]):
        self.key = key
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []
        self.call_ids: set[str] = set()
        self.meta = meta

    def add_call(self, call: ToolCall) -> bool:
        """Add a call unless this message already has one with its id (repeated lines)."""
        if call.id and call.id in self.call_ids:
            return False
        self.call_ids.add(call.id)
        self.calls.append(call)
        return True

    def message(self) -> Message:
        return Message.of(
            "assistant", "".join(self.texts), tool_calls=self.calls, meta=self.meta
        )


class HistoryBuilder:
    """Collects canonical messages in order and merges the records of one model response.

    `assistant(key)` reopens the previous assistant draft when it has the same key and only
    tool results came after it: streaming formats (Claude Code, OpenHands parallel calls,
    Responses output items) split one response over several records, sometimes with results
    interleaved, and SPEC §1 needs every assistant message to answer one model call.
    """

    def __init__(self) -> None:
        self.items: list[Message | AssistantDraft] = []
        self._open: AssistantDraft | None = None

    def assistant(self, key: Any, meta: dict[str, Any] | None = None) -> AssistantDraft:
        if self._open is not None and key is not None and self._open.key == key:
            return self._open
        draft = AssistantDraft(key, meta if meta is not None else {})
        self.items.append(draft)
        self._open = draft
        return draft

    @property
    def open_assistant(self) -> AssistantDraft | None:
        return self._open

    def add(self, message: Message) -> None:
        self.items.append(message)
        if message.role != "tool":
            self._open = None

    def close(self) -> None:
        """End the current response: the next assistant record starts a new message."""
        self._open = None

    def messages(self) -> tuple[Message, ...]:
        return tuple(
            item.message() if isinstance(item, AssistantDraft) else item for item in self.items
        )


def require_sessions(sessions: list[Any], what: str) -> list[Any]:
    """An import that finds no conversation fails rather than storing an empty session."""
    if not sessions:
        raise TranscriptError(f"no conversation found: {what}")
    return sessions
