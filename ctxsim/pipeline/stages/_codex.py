"""What both Codex CLI stages know about Codex (SPEC-agents §2.5.4–§2.5.5): its model table,
its middle truncation, its compaction texts, which messages a compaction keeps, and its own
token estimate. Measured in UTF-8 bytes, as Codex (Rust) does.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from ..agents_common import approx_tokens
from ..messages import Message

# First match wins, in this order (codex model_info.rs `find_model_info_for_slug`): slug
# prefixes, truncation mode, context window. The limit is 10 000 for every row.
MODEL_TABLE: tuple[tuple[tuple[str, ...], str, int | None], ...] = (
    (("o3", "o4-mini"), "bytes", 200_000),
    (("codex-mini-latest",), "bytes", 200_000),
    (("gpt-4.1",), "bytes", 1_047_576),
    (("gpt-oss", "openai/gpt-oss"), "bytes", 96_000),
    (("gpt-4o",), "bytes", 128_000),
    (("gpt-3.5",), "bytes", 16_385),
    (("exp-codex", "codex-1p"), "tokens", 272_000),
    (("exp-",), "bytes", 272_000),
    (("gpt-5.2-codex", "bengalfox", "gpt-5.1-codex-max", "gpt-5-codex", "gpt-5.1-codex",
      "codex-"), "tokens", 272_000),
    (("gpt-5.2", "boomslang", "gpt-5.1", "gpt-5"), "bytes", 272_000),
)
DEFAULT_LIMIT = 10_000

# templates/compact/summary_prefix.md: 400 bytes, no trailing newline, double space kept.
SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its "
    "thinking process. You also have access to the state of the tools that were used by that "
    "language model. Use this to build on the work that has already been done and avoid "
    "duplicating work. Here is the summary produced by the other language model, use the "
    "information in this summary to  assist with your own analysis:"
)
NO_SUMMARY = "(no summary available)"


def model_row(model: str | None) -> tuple[str, int | None] | None:
    """(mode, window) of the first table row whose prefix `model` starts with; None: no row."""
    if model:
        for prefixes, mode, window in MODEL_TABLE:
            if model.startswith(prefixes):
                return mode, window
    return None


def history_budget(policy: Mapping[str, Any]) -> dict[str, Any]:
    """`policy × 1.2`, rounded up in binary64 as Codex's `impl Mul<f64>` does."""
    return {"mode": policy["mode"], "limit": math.ceil(policy["limit"] * 1.2)}


def _marker(n: int, tokens: bool) -> bytes:
    return f"\u2026{n} {'tokens' if tokens else 'chars'} truncated\u2026".encode()


def _boundary_at_or_before(data: bytes, pos: int) -> int:
    while 0 < pos < len(data) and data[pos] & 0xC0 == 0x80:
        pos -= 1
    return pos


def _boundary_at_or_after(data: bytes, pos: int) -> int:
    while pos < len(data) and data[pos] & 0xC0 == 0x80:
        pos += 1
    return pos


def _code_points(data: bytes) -> int:
    return len(data.decode("utf-8"))  # callers pass valid UTF-8 (`codex_text`)


def cut(data: bytes, max_bytes: int, tokens: bool) -> bytes:
    """Codex `truncate_with_byte_estimate` on valid UTF-8: whole characters that end within
    the first `max_bytes // 2` bytes, a marker, whole characters that start within the last
    `max_bytes - max_bytes // 2` bytes. The marker counts ⌈(bytes − budget)/4⌉ tokens (tokens
    mode) or the removed code points (bytes mode)."""
    if not data:
        return b""
    if max_bytes == 0:
        return _marker(approx_tokens(len(data)) if tokens else _code_points(data), tokens)
    if len(data) <= max_bytes:
        return data
    left = max_bytes // 2
    right = max_bytes - left
    head_end = _boundary_at_or_before(data, left)
    tail_start = _boundary_at_or_after(data, len(data) - right)
    removed = (approx_tokens(len(data) - max_bytes) if tokens
               else _code_points(data[head_end:tail_start]))
    return data[:head_end] + _marker(removed, tokens) + data[tail_start:]


def truncate_tokens(data: bytes, budget: int) -> bytes:
    """Codex `truncate_middle_with_token_budget`: unchanged within 4·budget bytes."""
    if not data:
        return b""
    if budget > 0 and len(data) <= 4 * budget:
        return data
    return cut(data, 4 * budget, tokens=True)


_SHAPED = re.compile("\u2026[0-9]+ (tokens|chars) truncated\u2026".encode())


def already_shaped(data: bytes, budget: Mapping[str, Any]) -> bool:
    """Whether `data` is already what `truncate` makes under this budget: it carries the
    marker and, without it, fits the budget's bytes (SPEC-agents §2.5.0.11: a stage leaves
    output its own era shaped as it is; cutting it again would cut the marker out)."""
    m = _SHAPED.search(data)
    if m is None:
        return False
    limit = budget["limit"] * (4 if budget["mode"] == "tokens" else 1)
    return len(data) - (m.end() - m.start()) <= limit


def truncate(data: bytes, budget: Mapping[str, Any]) -> bytes:
    """Truncate valid UTF-8 `data` to a history budget {"mode", "limit"}."""
    if budget["mode"] == "tokens":
        return truncate_tokens(data, budget["limit"])
    return cut(data, budget["limit"], tokens=False)


def call_of(index: int, positions: Sequence[int]) -> int:
    """r(i) by bisection over the assistant positions (agents_common's walks the history)."""
    return bisect_left(positions, index)


def is_compaction_message(m: Message) -> bool:
    """A recorded Codex compaction message (the rollout's `compacted` line), which the views
    of `codex_autocompact` never show as conversation."""
    marker = m.meta.get("compaction")
    if isinstance(marker, Mapping) and marker.get("source") == "codex":
        return marker.get("kind") == "summary"
    return bool(m.meta.get("compacted")) and m.role == "user"


# --- compaction (SPEC-agents §2.5.5): which messages are summaries, context or requests --

SUMMARY_START = (SUMMARY_PREFIX + "\n").encode()


def _text(m: Message) -> str:
    return m.content.decode("utf-8", "replace")


def is_summary(m: Message) -> bool:
    return m.role == "user" and (m.content.startswith(SUMMARY_START) or is_compaction_message(m))


def is_contextual(m: Message, prefixes: Sequence[str]) -> bool:
    if m.role != "user":
        return False
    head = _text(m).lstrip().lower()
    return any(head.startswith(p.lower()) for p in prefixes)


def is_real_user_message(m: Message, prefixes: Sequence[str]) -> bool:
    return (m.role == "user" and not is_contextual(m, prefixes) and not is_summary(m)
            and m.meta.get("kind") != "codex_compaction_item")


def recorded_marker(m: Message) -> Mapping[str, Any] | None:
    marker = m.meta.get("compaction")
    if isinstance(marker, Mapping) and marker.get("source") == "codex":
        return marker
    if m.meta.get("compacted") and m.role == "user":  # imported before markers existed
        return {"source": "codex", "kind": "summary", "message_present": bool(m.content),
                "replacement_history": None}
    return None


def estimate_tokens(m: Message) -> int:
    """Codex's estimate of an item it has no usage for: ⌈bytes/4⌉ of its text parts."""
    size = len(m.content) + len(m.tool_call_id.encode())
    size += sum(len(c.name.encode()) + len(c.arguments.encode()) for c in m.tool_calls)
    return approx_tokens(size)


def has_usage(m: Message) -> bool:
    usage = m.meta.get("usage") if m.role == "assistant" else None
    total = usage.get("total_tokens") if isinstance(usage, Mapping) else None
    return isinstance(total, int) and not isinstance(total, bool)
