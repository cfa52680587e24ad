"""Claude Code's handling of a tool result as it enters the history (SPEC-agents §2.5.1).

Bash output cap (`BASH_MAX_OUTPUT_LENGTH`: persisted with a preview, or middle-truncated in 2025
versions), MCP token cap (`MAX_MCP_OUTPUT_TOKENS`), the optional Read token cap, and the
persist-to-disk threshold with its `<persisted-output>` preview. Claude Code is proprietary:
every rule here comes from its documentation, public issues and observed transcripts, and
where those are silent the behaviour is a parameter with ctxsim's default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..agent_settings import claude_env_effective
from ..agents_common import (
    JS_SPACE,
    cc_rough,
    fmt_size,
    text_of,
    u16len,
    u16slice,
)
from ..messages import Message
from ..spill import SpillError
from . import StageContext, StageResult
from ._ownership import result_owners

PREVIEW_UNITS = 2000
PERSISTED_OPEN = "<persisted-output>"


def project_slug(cwd: str | None) -> str:
    """Claude Code's project folder name: the cwd with every non-alphanumeric made `-`."""
    if not cwd:
        return "unknown-project"
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def results_dir(params: Mapping[str, Any], session: Mapping[str, Any]) -> str:
    template = params.get("cc_tool_results_dir") or ""
    return (template.replace("{project}", project_slug(session.get("cwd")))
            .replace("{session_id}", session.get("session_id") or "unknown-session"))


def preview(s: str, cut_mode: str) -> tuple[str, bool]:
    """The first 2000 units, ended at the last line break past unit 1000 in `newline` mode."""
    if u16len(s) <= PREVIEW_UNITS:
        return s, False
    head = u16slice(s, 0, PREVIEW_UNITS)
    i = head.rfind("\n")
    # `head` is the text up to unit 2000, so a code-point index of "\n" in it is a unit index
    # only when no astral character comes before it; measure it in units.
    units = u16len(head[:i]) if i >= 0 else -1
    cut = units if cut_mode == "newline" and units > 1000 else PREVIEW_UNITS
    return u16slice(s, 0, cut), True


def persisted(path: str, size: int, prev: str, more: bool) -> str:
    return (f"{PERSISTED_OPEN}\nOutput too large ({fmt_size(size)}). Full output saved to: "
            f"{path}\n\nPreview (first {fmt_size(PREVIEW_UNITS)}):\n{prev}"
            + ("\n...\n" if more else "\n") + "</persisted-output>")


def trim_for_persist(t: str) -> str:
    """JavaScript `t.replace(/^(\\s*\\n)+/, "").trimEnd()`: leading blank lines and trailing
    white space go."""
    lead = len(t) - len(t.lstrip(JS_SPACE))
    cut = t.rfind("\n", 0, lead)
    return t[cut + 1:].rstrip(JS_SPACE)


def middle_truncate(t: str, limit: int) -> str:
    h = limit // 2
    n = u16len(t)
    middle = u16slice(t, h, n - h)
    lines = len(middle.split("\n"))
    return (u16slice(t, 0, h) + f"\n\n... [{lines} lines truncated] ...\n\n"
            + u16slice(t, n - h, n))


MIDDLE_MARKER = re.compile(r"\n\n\.\.\. \[[0-9]+ lines truncated\] \.\.\.(\n\n)?")


def middle_shaped(t: str, limit: int) -> bool:
    """Whether `t` is already a Bash output a `middle` release cut to `limit`: it carries the
    `... [N lines truncated] ...` marker and, without it, fits the limit (SPEC-agents
    §2.5.0.11). The marker's trailing blank line is optional: the 2.0.28 transcript shows it
    at the very end of a cut result [O]."""
    m = MIDDLE_MARKER.search(t)
    return m is not None and u16len(t) - u16len(m.group(0)) <= limit


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Transform the last message (a tool result entering the history) as Claude Code would.

    Invariant: only the last message may change; errors, image results, already persisted
    results and (`middle`) Bash output already cut to the limit are never changed; a
    persisted result's full text is recorded as one spill.
    """
    p = ctx.params
    msg = history[-1]
    env = claude_env_effective(p.get("claude_env") or {})
    owner = result_owners(history).get(len(history) - 1)
    call = None
    if owner is not None:
        call = next((c for c in history[owner].tool_calls if c.id == msg.tool_call_id), None)
    name = call.name if call is not None else ""
    text = text_of(msg)
    before = u16len(text)
    report: dict[str, Any] = {
        "tool": name, "rule": None, "units_before": before, "units_after": before,
        "spill_path": None, "skipped": None,
        "env_effective": {"BASH_MAX_OUTPUT_LENGTH": env.bash_max_output,
                          "MAX_MCP_OUTPUT_TOKENS": env.mcp_max_tokens},
    }
    unchanged = StageResult(tuple(history), report)
    if msg.role != "tool":
        return unchanged
    skipped = ("error" if msg.is_error else "image" if msg.meta.get("binary_parts")
               else "already_persisted" if text.startswith(PERSISTED_OPEN) else None)
    if skipped:
        report["skipped"] = skipped
        return unchanged
    call_id = call.id if call is not None else msg.tool_call_id or "unknown"
    path = results_dir(p, ctx.session) + "/" + call_id + ".txt"
    rules: list[str] = []
    is_error = False
    spill: str | None = None
    out = text
    if name in (p.get("cc_bash_tools") or ()):
        limit = env.bash_max_output
        middle = p.get("cc_bash_mode") == "middle"
        if middle and u16len(text) > limit and middle_shaped(text, limit):
            report["skipped"] = "already_truncated"
            return unchanged
        if u16len(text) > limit:
            if middle:
                out = middle_truncate(text, limit)
                rules.append("bash_middle")
            else:
                trimmed = trim_for_persist(text) if p.get("cc_bash_persist_trim", True) else text
                prev, more = preview(trimmed, p.get("cc_preview_cut", "newline"))
                out = persisted(path, len(text.encode("utf-8", "surrogatepass")), prev, more)
                spill = text
                rules.append("bash_persist")
    else:
        persist = True
        if name.startswith("mcp__"):
            out, is_error, rule = _mcp(text, name, env.mcp_max_tokens, ctx)
            if rule:
                rules.append(rule)
            persist = not is_error
        elif name == "Read" and p.get("cc_read_cap"):
            n = ctx.counter.count(text.encode("utf-8", "surrogatepass"))
            cap = env.read_max_tokens
            if n > cap:
                out = (f"File content ({n} tokens) exceeds maximum allowed tokens ({cap}). Use "
                       "offset and limit parameters to read specific portions of the file, or "
                       "search for specific content instead of reading the whole file.")
                is_error, persist = True, False
                rules.append("read_cap")
        overrides = p.get("cc_persist_overrides") or {}
        threshold = (overrides[name] if name in overrides
                     else p.get("cc_persist_threshold_chars", 50000))
        if persist and threshold is not None and u16len(out) > threshold:
            prev, more = preview(out, p.get("cc_preview_cut", "newline"))
            spill = out
            out = persisted(path, u16len(out), prev, more)
            rules.append("persist")
    if not rules:
        return unchanged
    report.update(rule="+".join(rules), units_after=u16len(out))
    if spill is not None:
        report["spill_path"] = path
        _record_spill(ctx, path, spill.encode("utf-8", "surrogatepass"), report)
    new = replace(msg, content=out.encode("utf-8", "surrogatepass"),
                  is_error=msg.is_error or is_error)
    return StageResult((*history[:-1], new), report)


def _mcp(text: str, name: str, cap: int, ctx: StageContext) -> tuple[str, bool, str | None]:
    """(content, is_error, rule) after the MCP token cap."""
    p = ctx.params
    factor = p.get("cc_mcp_precheck_factor") or 0
    if factor > 0 and cc_rough(u16len(text)) <= factor * cap:
        return text, False, None
    n = ctx.counter.count(text.encode("utf-8", "surrogatepass"))
    if n <= cap:
        return text, False, None
    if p.get("cc_mcp_mode") == "error":
        tool = name.rsplit("__", 1)[-1]
        return (f'MCP tool "{tool}" response ({n} tokens) exceeds maximum allowed tokens '
                f"({cap}). Please use pagination, filtering, or limit parameters to reduce the "
                "response size.", True, "mcp_error")
    notice = (p.get("cc_mcp_truncation_notice") or "").replace("{max}", str(cap))
    return u16slice(text, 0, 4 * cap) + notice, False, "mcp_truncate"


def _record_spill(ctx: StageContext, path: str, data: bytes, report: dict[str, Any]) -> None:
    spills = ctx.spills
    if spills is None:
        return
    directory, _, file_name = path.rpartition("/")
    try:
        spills.ensure_dir(directory)
        spills.write(directory, file_name, path, data, ctx.call_index)
    except SpillError as exc:
        # Claude Code writes under the user's home; a sink that cannot does not change what
        # the model received, only that the file is missing.
        report["spill_error"] = str(exc)


# --- what a report means ----------------------------------------------------------------------


def describe(report: Mapping[str, Any]) -> str:
    """One dispatch entry in a sentence."""
    if report.get("skipped"):
        return f"{report.get('tool') or 'Result'} left as is ({report['skipped']})."
    rule = report.get("rule")
    if not rule:
        return f"{report.get('tool') or 'Result'}: under every limit, unchanged."
    where = f", saved to {report['spill_path']}" if report.get("spill_path") else ""
    return (f"{report.get('tool')}: {rule.replace('_', ' ')}, {report.get('units_before')} → "
            f"{report.get('units_after')} UTF-16 units{where}.")
