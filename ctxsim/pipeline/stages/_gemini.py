"""What the Gemini CLI stages share (SPEC-agents-2 §1): its token estimate, the JSON sizes its
split walks, its head/tail truncation text, its token limit and its version eras.
Measured in UTF-16 code units, as Gemini CLI (TypeScript) does."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..agents_common import u16len, u16slice
from ..messages import Message
from ._agents2 import Era, text

SOURCE = "gemini-cli"
SHELL_TOOL = "run_shell_command"
ACK = "Got it. Thanks for the additional context!"
MASK_TAG = "tool_output_masked"
EXEMPT_TOOLS = frozenset({"activate_skill", "ask_user", "enter_plan_mode", "exit_plan_mode"})
GEMINI_LIMIT = 1_048_576
GEMMA_LIMIT = 256_000

# Ascending. The newest era's values are the parameters' table defaults.
_OLD = {"gemini_function_response_budget": 0, "gemini_truncate_mode": "last_lines",
        "gemini_truncate_threshold": 4_000_000, "gemini_mask_enabled": False}
ERAS = (
    Era("0.0", "Gemini CLI ≤ 0.12: compress at 70 %", {**_OLD, "gemini_compression_threshold":
        0.7}, "model.chatCompression.contextPercentageThreshold default 0.7 (before 68afb720)"),
    Era("0.13", "Gemini CLI 0.13–0.16: compress at 20 %", {**_OLD,
        "gemini_compression_threshold": 0.2}, "commit 68afb720 (0.7 → 0.2, v0.13)"),
    Era("0.17", "Gemini CLI 0.17: compress at 70 %", {**_OLD,
        "gemini_compression_threshold": 0.7}, "commit 6d83d344 (→ 0.7, v0.17)"),
    Era("0.18", "Gemini CLI 0.18–0.25: compress at 50 %", {**_OLD,
        "gemini_compression_threshold": 0.5}, "commit c7b5dcd2 (→ 0.5, v0.18)"),
    Era("0.26", "Gemini CLI 0.26–0.28: 50,000-token tool-response budget", {
        **_OLD, "gemini_compression_threshold": 0.5, "gemini_function_response_budget": 50000},
        "commit 08c32f72 (2026-01-19, COMPRESSION_FUNCTION_RESPONSE_TOKEN_BUDGET)"),
    Era("0.29", "Gemini CLI ≥ 0.29: 40,000-char head/tail truncation, output masking", {
        "gemini_compression_threshold": 0.5, "gemini_function_response_budget": 50000,
        "gemini_truncate_mode": "head_tail", "gemini_truncate_threshold": 40000,
        "gemini_mask_enabled": True}, "commit 28805a4b (2026-02-06); "
        "toolOutputMaskingService.ts"),
)


def estimate_text(s: str) -> float:
    """estimateTextTokens: ASCII code units 1/4, others 1.5; over 100,000 units length/4."""
    n = u16len(s)
    if n > 100_000:
        return n / 4
    if s.isascii():
        return n / 4
    ascii_count = sum(1 for c in s if ord(c) <= 127)
    return ascii_count / 4 + (n - ascii_count) * 1.5


def estimate(m: Message) -> int:
    """estimateTokenCountSync of one content's parts (text, calls as JSON / 4), floored."""
    total = estimate_text(text(m))
    for call in m.tool_calls:
        total += (u16len(call.name) + u16len(call.arguments)) / 4
    return int(total)


def response_tokens(m: Message, name: str = "") -> int:
    """estimateTokenCountSync of one functionResponse part: (name + JSON of the response
    `{"output": text}`) / 4, every character alike, floored."""
    body = json.dumps({"output": text(m)}, ensure_ascii=False, separators=(",", ":"))
    return (u16len(name) + u16len(body)) // 4


def json_size(m: Message) -> int:
    """len(JSON.stringify(content)), as ctxsim approximates it: the text and the calls' names
    and arguments in UTF-16 units, without the JSON wrapper [X]."""
    return u16len(text(m)) + sum(u16len(c.name) + u16len(c.arguments) for c in m.tool_calls)


def token_limit(params: Mapping[str, Any], session: Mapping[str, Any]) -> int:
    if params.get("gemini_token_limit"):
        return int(params["gemini_token_limit"])
    model = str(session.get("model") or "")
    return GEMMA_LIMIT if model.startswith("gemma") else GEMINI_LIMIT


def output_file(session: Mapping[str, Any], tool: str, call_id: str) -> str:
    """Where Gemini CLI saves a full output: `<projectTemp>/tool-outputs/session-<id>/…`
    (the project temp folder is not in transcripts: `~/.gemini/tmp/<project>` stands in)."""
    sid = "".join(c if c.isalnum() or c in "_-" else "_" for c in str(
        session.get("session_id") or "session"))
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in tool).lower() or "tool"
    cid = "".join(c if c.isalnum() or c in "_-" else "_" for c in call_id).lower() or "0"
    base = cid if cid.startswith(name) else f"{name}_{cid}"
    return f"~/.gemini/tmp/<project>/tool-outputs/session-{sid}/{base}.txt"


def truncated_output(content: str, file: str, max_chars: int) -> str:
    """formatTruncatedToolOutput: 20 % head + 80 % tail of `max_chars` around a notice."""
    n = u16len(content)
    if n <= max_chars:
        return content
    head_chars = max_chars // 5
    tail_chars = max_chars - head_chars
    head = u16slice(content, 0, head_chars)
    tail = u16slice(content, n - tail_chars, n) if tail_chars else ""
    omitted = n - head_chars - tail_chars
    return (f"Output too large. Showing first {head_chars:,} and last {tail_chars:,} "
            f"characters. For full output see: {file}\n{head}\n\n... [{omitted:,} characters "
            f"omitted] ...\n\n{tail}")


def last_lines_output(content: str, lines: int) -> str:
    """v0.3–v0.28: the last `lines` lines of a too-large shell output, under a header."""
    all_lines = content.split("\n")
    kept = all_lines[-lines:]
    return (f"Output too large. Showing the last {len(kept):,} of {len(all_lines):,} lines.\n"
            + "\n".join(kept))


def tool_names(history: Sequence[Message]) -> dict[str, str]:
    return {c.id: c.name for m in history if m.role == "assistant" for c in m.tool_calls}


def is_mcp(tool: str) -> bool:
    """MCP tools as transcripts name them (`server__tool` or `mcp_…`) [X]."""
    return "__" in tool or tool.startswith("mcp_")
