"""The canonical message model (SPEC §1): immutable values shared by the engine and importers.

Content is kept as the exact UTF-8 *bytes* the history holds. ChatCLI measures and cuts by byte,
so a cut may split a character and leave bytes that are not valid UTF-8; keeping bytes makes
every later measurement and cut exact. Text is derived only for display (`Message.text`), with
one U+FFFD per invalid byte, as Go's JSON encoder renders it.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

ROLES = ("system", "user", "assistant", "tool")

EMPTY_META: Mapping[str, Any] = MappingProxyType({})


def _replace_each_byte(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):  # registered for decoding only
        raise error
    # Python reports a maximal invalid subsequence at once; Go's decoder consumes one byte per
    # error, so it emits one replacement character per invalid byte.
    return "\ufffd" * (error.end - error.start), error.end


codecs.register_error("ctxsim-go-replace", _replace_each_byte)


def decode_for_display(data: bytes) -> str:
    """Decode bytes as Go renders them: valid UTF-8 as is, every invalid byte as U+FFFD."""
    return data.decode("utf-8", "ctxsim-go-replace")


def is_valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call of an assistant message; `arguments` is the JSON string, carried verbatim."""

    id: str
    name: str
    arguments: str = ""
    type: str = "function"


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a history. Stages return new values instead of mutating.

    `meta` keeps what the source had beyond the model: `timestamp`, `usage`, `source_line`,
    `sidechain`, `binary_parts` (a list of {"type", "media_type", "base64_length", "bytes"}) and
    any format-specific extras. It never influences a stage except through `binary_parts`, which
    the token formula counts.
    """

    role: str
    content: bytes = b""
    name: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    is_error: bool = False
    error_code: str = ""
    agent_feedback: bool = False
    meta: Mapping[str, Any] = field(default=EMPTY_META, compare=False)
    # Index of the transcript message this one comes from (None: injected by a stage). Rewrites
    # keep it, so what was sent can be aligned with the raw history message by message.
    origin: int | None = field(default=None, compare=False)

    @classmethod
    def of(cls, role: str, text: str | bytes | None = "", **fields: Any) -> Message:
        """Build a message from text (encoded as UTF-8) or exact bytes."""
        if text is None:
            content = b""
        elif isinstance(text, bytes):
            content = text
        else:
            content = text.encode("utf-8", "surrogatepass")
        if "tool_calls" in fields:
            fields["tool_calls"] = tuple(fields["tool_calls"])
        if "meta" in fields and not isinstance(fields["meta"], MappingProxyType):
            fields["meta"] = MappingProxyType(dict(fields["meta"]))
        return cls(role=role, content=content, **fields)

    @property
    def text(self) -> str:
        """The content for display: invalid bytes become U+FFFD (never use it to measure)."""
        return decode_for_display(self.content)

    @property
    def size(self) -> int:
        """Size in UTF-8 bytes, the unit every ChatCLI stage measures in."""
        return len(self.content)

    def with_content(self, content: bytes) -> Message:
        # The constructor with every field, not `dataclasses.replace` (twice its cost): stages
        # rewrite a content thousands of times a replay (ChatCLI re-spills every oversized
        # result at each call). `test_with_content_keeps_every_other_field` guards the list.
        return Message(self.role, content, self.name, self.tool_calls, self.tool_call_id,
                       self.is_error, self.error_code, self.agent_feedback, self.meta,
                       self.origin)

    @property
    def has_calls(self) -> bool:
        return self.role == "assistant" and bool(self.tool_calls)


@dataclass(frozen=True, slots=True)
class Session:
    """One conversation read from a transcript file (a file may yield several).

    `key` identifies the session inside its file (e.g. a Claude Code sidechain's agent id);
    `parent_key` links a sidechain to the session it belongs to. `tools` and `response_schema`
    are kept exactly as the source gave them, since the token formula serializes them.
    """

    format: str
    title: str
    messages: tuple[Message, ...]
    tools: list[Any] | None = None
    response_schema: Any = None
    key: str = ""
    parent_key: str | None = None
    meta: Mapping[str, Any] = field(default=EMPTY_META, compare=False)
    warnings: tuple[str, ...] = ()

    @property
    def tool_call_count(self) -> int:
        return sum(len(m.tool_calls) for m in self.messages)

    @property
    def tool_result_count(self) -> int:
        return sum(1 for m in self.messages if m.role == "tool")


def _calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    for c in raw or ():
        if isinstance(c, ToolCall):
            calls.append(c)
        elif isinstance(c, Mapping):
            fn: Mapping[str, Any] = c["function"] if isinstance(c.get("function"), Mapping) \
                else {}
            args = fn.get("arguments", "")
            calls.append(ToolCall(str(c.get("id", "")), str(fn.get("name", "")),
                                  args if isinstance(args, str) else "",
                                  str(c.get("type") or "function")))
    return tuple(calls)


def replacement_messages(items: Sequence[Any]) -> list[Message]:
    """Canonical messages of a recorded replacement history, kept in `meta` as message
    objects of the scenario shape (role, content, tool_calls, tool_call_id, meta)."""
    out = []
    for item in items:
        if isinstance(item, Message):
            out.append(item)
            continue
        if not isinstance(item, Mapping) or item.get("role") not in (
                "system", "user", "assistant", "tool"):
            continue
        content = item.get("content")
        meta = item.get("meta") if isinstance(item.get("meta"), Mapping) else {}
        out.append(Message.of(
            item["role"], content if isinstance(content, str) else "",
            tool_calls=_calls(item.get("tool_calls")),
            tool_call_id=str(item.get("tool_call_id") or ""),
            is_error=item.get("is_error") is True, meta=meta,
        ))
    return out


def replacement_sent(marker: Mapping[str, Any]) -> list[Message] | None:
    """What a recorded replacement history (Codex's remote compaction, a compaction marker's
    `replacement_history`) puts in the prompt after the prompt's own leading system messages;
    None when the marker records none."""
    items = marker.get("replacement_history")
    if not isinstance(items, (list, tuple)):
        return None
    return [m for m in replacement_messages(items) if m.role != "system"]
