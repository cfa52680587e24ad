"""Per-tool cap at dispatch (behaviour file §2): `TruncateForLLM` with the plugin's cap.

Runs once per tool message, as it enters the history: the message is the last of `history`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import overload

from ..messages import Message
from . import StageContext, StageResult, from_units, lit, to_units

DEFAULT_CAP = 30000
PREVIEW, SUFFIX = 5000, 1000
PLUGIN_CAPS = {"@read": 80000, "@search": 60000, "@tree": 50000, "@docs-flatten": 50000}
# Native function names ChatCLI maps to a plugin; every other native name runs as @coder.
NATIVE_PLUGINS = {
    "web_search": "@websearch",
    "web_fetch": "@webfetch",
    "squad_mail": "@mail",
    "board_cards": "@board",
    "agents_runs": "@agents",
    "ask_user": "@ask",
}


def dispatch_name(function_name: str, tool_caps: Mapping[str, str] | None = None) -> str:
    """The plugin a call dispatches as: the profile's `tool_caps` first, then ChatCLI's map."""
    if tool_caps and function_name in tool_caps:
        plugin = tool_caps[function_name]
        return plugin if plugin.startswith("@") else "@" + plugin
    if function_name in NATIVE_PLUGINS:
        return NATIVE_PLUGINS[function_name]
    if function_name.startswith("@"):
        return function_name
    return "@coder"


def plugin_cap(plugin: str) -> int:
    return PLUGIN_CAPS.get(plugin, DEFAULT_CAP)


@overload
def truncate_for_llm(s: bytes, cap: int) -> bytes: ...
@overload
def truncate_for_llm(s: str, cap: int) -> str: ...
def truncate_for_llm[U: (bytes, str)](s: U, cap: int) -> U:
    """ChatCLI's `TruncateForLLM`: unchanged up to the cap, else head 5000 + marker + tail 1000.

    Cuts are raw offsets in the unit of `s` (bytes as implemented), never snapped to newlines.
    """
    if cap <= 0:
        cap = DEFAULT_CAP
    if len(s) <= cap:
        return s
    if cap <= PREVIEW + SUFFIX:
        return s[:cap] + lit("\n\n... [TRUNCATED]", s)
    omitted = len(s) - PREVIEW - SUFFIX
    marker = f"\n\n... [TRUNCATED {omitted} chars omitted, {PREVIEW + SUFFIX} kept] ...\n\n"
    return s[:PREVIEW] + lit(marker, s) + s[len(s) - SUFFIX:]


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Cap the last message (a tool result entering the history).

    Invariant: only the last message may change, and only when it answers a call of the most
    recent assistant message and is not an error; errors are stored verbatim.
    """
    msg = history[-1]
    assistant = next((m for m in reversed(history[:-1]) if m.role == "assistant"), None)
    call = None
    if msg.role == "tool" and assistant is not None:
        call = next((c for c in assistant.tool_calls if c.id == msg.tool_call_id), None)
    units = to_units(msg.content, ctx.documented)
    report = {
        "tool_call_id": msg.tool_call_id,
        "function_name": "",
        "dispatch_name": "",
        "cap_applied": False,
        "cap": 0,
        "input_len": len(units),
        "stored_len": len(units),
    }
    if call is None:
        return StageResult(tuple(history), report)
    plugin = dispatch_name(call.name, ctx.params.get("tool_caps"))
    cap = plugin_cap(plugin)
    report.update(function_name=call.name, dispatch_name=plugin, cap=cap)
    if msg.is_error:
        return StageResult(tuple(history), report)
    capped = truncate_for_llm(units, cap)
    report.update(cap_applied=True, stored_len=len(capped))
    if capped is units:
        return StageResult(tuple(history), report)
    return StageResult((*history[:-1], msg.with_content(from_units(capped))), report)
