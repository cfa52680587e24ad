"""Everything the session page template shows, built from a replay summary and one call.

Kept apart from the views so each view stays parse → build → render, and from `services` so the
replay mechanics and their presentation can change separately.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxsim.pipeline.params import PARAMS, ascii_index, resolve_env
from ctxsim.pipeline.registry import PHASES, STAGES, params_of
from ctxsim.replays import analysis, services
from ctxsim.replays.cache import REPLAYS, ReplayKey
from ctxsim.replays.message_list import render_rows
from ctxsim.replays.models import ReplayRun
from ctxsim.transcripts.models import Session

# Message bodies longer than this are collapsed in the call view ("show all" loads the rest).
COLLAPSE_BYTES = 1200
# Unchanged messages are the bulk of a late call and the least interesting part of it.
COLLAPSE_UNCHANGED_BYTES = 300
# Units a parameter of this kind is edited in.
STAGE_FAMILY_LABEL = {"chatcli": "ChatCLI", "aivax": "AIVAX gateway", "anthropic": "Anthropic"}


@dataclass
class Field:
    name: str
    label: str
    kind: str
    value: Any
    help: str
    unit: str = ""
    choices: tuple[str, ...] = ()
    env_vars: list[dict[str, Any]] | None = None
    error: str = ""


def form_fields(settings: services.ReplaySettings, errors: dict[str, str]) -> list[Field]:
    """The thresholds form, generated from the typed parameters of the profile's stages."""
    rc = settings.run_config()
    fields = []
    for name in sorted(params_of(rc.stages) | {"counter"}, key=_param_order):
        spec = PARAMS[name]
        value = rc.values.get(name)
        field = Field(name, spec.label, spec.kind, value, spec.help, spec.unit, spec.choices,
                      error=errors.get(name, ""))
        if spec.kind == "env":
            typed = rc.values.get("env") or {}
            env = resolve_env(typed)
            field.env_vars = [
                {"name": var.name, "label": var.label, "help": var.help, "default": var.default,
                 "unit": "assistant turns" if "TURNS" in var.name else "bytes",
                 "typed": typed.get(var.name, ""), "effective": env[var.name].effective,
                 "warning": env[var.name].warning}
                for var in spec.env_vars
            ]
        elif spec.kind in ("list",):
            field.value = ", ".join(value or ())
        elif spec.kind == "map":
            field.value = ", ".join(f"{k}={v}" for k, v in (value or {}).items())
        elif name == "clear_tool_inputs":
            field.value = ("true" if value is True else "false" if value in (False, None)
                           else ", ".join(value))
        fields.append(field)
    return fields


_ORDER = ["counter", "env", "loop_mode", "ccr", "tool_caps", "exempt_tools", "semantics",
          "spill_dir", "anchor_text", "toolContextCount", "toolContextPlaceholder",
          "contextMaximumSize", "contextOverflowAction", "systemInstructions", "trigger", "keep",
          "clear_at_least", "exclude_tools", "clear_tool_inputs", "placeholder"]


def _param_order(name: str) -> int:
    return _ORDER.index(name) if name in _ORDER else len(_ORDER)


def stage_rows(settings: services.ReplaySettings) -> list[dict[str, Any]]:
    """One row per registered stage: enabled?, its phase and position, the allowed phases."""
    current = list(settings.effective_stages)
    rows = []
    for name, definition in STAGES.items():
        entry = next(((i, p) for i, (s, p) in enumerate(current) if s == name), None)
        rows.append({
            "name": name, "label": definition.label, "help": definition.help,
            "family": STAGE_FAMILY_LABEL.get(definition.family, definition.family),
            "enabled": entry is not None,
            "phase": entry[1] if entry else definition.phases[0],
            "order": (entry[0] + 1) * 10 if entry else 99,
            "phases": definition.phases,
        })
    rows.sort(key=lambda r: (not r["enabled"], r["order"]))
    return rows


def chart_data(run: ReplayRun, selected: int, comment_counts: dict[int, int] | None = None):
    """The data the chart script reads (through json_script: never executable)."""
    values = run.config
    limit = None
    if any(s == "context_limit" for s, _ in run.stages):
        limit = values.get("contextMaximumSize")
    elif any(s == "clear_tool_uses" for s, _ in run.stages):
        trigger = values.get("trigger") or {}
        if trigger.get("type") == "input_tokens":
            limit = trigger.get("value")
    return {
        "labels": [c["i"] for c in run.calls],
        "raw": [c["raw"] for c in run.calls],
        "sent": [c["sent"] for c in run.calls],
        "failed": [c["i"] for c in run.calls if c["error"]],
        "spills": [c["i"] for c in run.calls if c["spills"]],
        "comments": comment_counts or {},
        "limit": limit,
        "limitLabel": "context limit" if any(s == "context_limit" for s, _ in run.stages)
        else "clear trigger",
        "selected": selected,
        "counter": run.counter,
    }


def summary(run: ReplayRun) -> dict[str, Any]:
    t = run.totals
    saved = sorted(t["saved_by_stage"].items(), key=lambda kv: -kv[1])
    return {
        **t,
        "saved_total": t["total_raw"] - t["total_sent"],
        "saved_list": [{"stage": s, "label": _saving_label(s), "tokens": n,
                        "share": (n / t["total_raw"] * 100) if t["total_raw"] else 0}
                       for s, n in saved],
    }


def _saving_label(stage: str) -> str:
    if stage == analysis.CARRIED:
        return "Persistent stages at earlier calls"
    return STAGES[stage].label if stage in STAGES else stage


def call_rows(detail: services.CallDetail) -> list[dict[str, Any]]:
    """Call-view rows with their display text, collapsed past COLLAPSE_BYTES.

    A message rewritten before this call and sent as this call's stages found it (a
    microcompact stub kept in the history, a result capped as it entered) shows what is sent,
    with its diff one click away: late calls carry hundreds of them, and their diffs made most
    of the call view's weight."""
    rows = []
    for position, row in enumerate(detail.view.rows):
        quiet = row.status == "unchanged" or row.carried
        text, hidden = analysis.display(
            row.message.content, COLLAPSE_UNCHANGED_BYTES if quiet else COLLAPSE_BYTES
        )
        entry = {"row": row, "index": position, "text": text, "hidden": hidden,
                 "calls": row.message.tool_calls, "delta": row.tokens - row.raw_tokens,
                 "carried": row.carried}
        if row.diff is not None:  # carried rows have none (see `analysis.call_view`)
            entry["diff"] = diff_entry(row.diff)
        rows.append(entry)
    return rows


def diff_entry(d: analysis.ContentDiff) -> dict[str, Any]:
    """A diff cut for display: the changed middle with a little context on each side."""
    return {
        "prefix": analysis.display(d.prefix[-300:])[0],
        "prefix_hidden": max(len(d.prefix) - 300, 0),
        "removed": analysis.display(d.removed, 400)[0], "removed_bytes": len(d.removed),
        "added": analysis.display(d.added, 1500)[0], "added_hidden": max(len(d.added) - 1500, 0),
        "suffix": analysis.display(d.suffix[:300])[0], "suffix_hidden": max(len(d.suffix) - 300, 0),
    }


def report_lines(call) -> list[dict[str, Any]]:
    """Each stage's report at this call, in plain words."""
    out = []
    for run in call.stages:
        r = run.report
        out.append({"stage": run.stage, "label": STAGES[run.stage].label, "phase": run.phase,
                    "saved": run.saved, "text": describe(run.stage, r), "report": r})
    return out


def describe(stage: str, r: dict[str, Any]) -> str:
    if stage == "microcompact":
        if r.get("skipped_early"):
            return "Skipped: ChatCLI does not microcompact in the first loop turns of a run."
        return (f"{r.get('truncated', 0)} result(s) truncated, {r.get('summarized', 0)} "
                f"summarized, {r.get('chars_saved', 0)} bytes saved.")
    if stage == "pairing":
        if not r.get("has_repairs") and not any(r.get(k) for k in analysis.REPAIR_KEYS):
            return "No repair needed."
        parts = [f"{r.get(k, 0)} {k.replace('_', ' ')}" for k in analysis.REPAIR_KEYS if r.get(k)]
        return "Repaired: " + ", ".join(parts) + "."
    if stage == "budget":
        return (f"{r.get('total_tool_results', 0)} results checked, "
                f"{r.get('results_truncated', 0)} spilled to files "
                f"({r.get('total_original_chars', 0)} → {r.get('total_final_chars', 0)} bytes).")
    if stage == "tool_context":
        return f"{r.get('kept', 0)} tool messages kept, {r.get('replaced', 0)} replaced."
    if stage == "context_limit":
        if r.get("limit") is None:
            return "No limit set."
        text = (f"{r.get('tokens_before')} → {r.get('tokens_after')} tokens against a limit of "
                f"{r.get('limit')} ({r.get('action')}); {r.get('removed', 0)} message(s) removed.")
        if r.get("error"):
            text += " The call FAILED: context_overflow."
        return text
    if stage == "clear_tool_uses":
        if not r.get("applied"):
            return "Not applied."
        return (f"Cleared {r.get('cleared_tool_uses', 0)} tool result(s) "
                f"({r.get('cleared_input_tokens', 0)} tokens); "
                f"{r.get('cleared_tool_inputs', 0)} input(s) cleared.")
    return ", ".join(f"{k}: {v}" for k, v in r.items() if not isinstance(v, (list, dict)))


def phase_names() -> tuple[str, ...]:
    return PHASES


def selected_call(run: ReplayRun, requested: str | None) -> int:
    """The call to show: the requested one when valid, else the one that sent the most."""
    count = len(run.calls)
    index = ascii_index(requested)
    if index is not None and index < count:
        return index
    if not count:
        return 0
    return max(range(count), key=lambda i: (run.calls[i]["sent"], i))


def neighbours(run: ReplayRun, index: int) -> tuple[int | None, int | None]:
    return (index - 1 if index > 0 else None,
            index + 1 if index + 1 < len(run.calls) else None)


def session_facts(session: Session) -> list[tuple[str, Any]]:
    return [("Format", session.format), ("Messages", session.message_count),
            ("Model calls", session.model_call_count), ("Tool calls", session.tool_call_count),
            ("Tool results", session.tool_result_count),
            ("Error results", session.error_result_count)]


def compare_chart(sides, selected: int) -> dict[str, Any]:
    first = sides[0].run
    return {
        "labels": [c["i"] for c in first.calls],
        "raw": [c["raw"] for c in first.calls],
        "series": [{"label": s.settings.profile.name, "sent": [c["sent"] for c in s.run.calls],
                    "failed": [c["i"] for c in s.run.calls if c["error"]]} for s in sides],
        "selected": selected,
        "counter": first.counter,
    }


def compare_column(session: Session, side, call: int) -> dict[str, Any]:
    """One side of the comparison: its summary and what it sent at the chosen call."""
    index = min(call, len(side.run.calls) - 1)
    detail = services.call_detail(session, side.settings, side.run, index)
    return {"side": side, "summary": summary(side.run), "rows": call_rows(detail),
            "counts": detail.view.counts, "call": detail.call,
            "reports": report_lines(detail.call)}


# --- the call view, cached across requests and processes ------------------------------------


@dataclass
class CallPack:
    """What the call view shows that depends only on the replay (not on who looks): figures,
    stage reports and the rendered rows. Plain data, so Django's cache can share it between
    worker processes; comment boxes are added per viewer."""

    index: int
    raw_tokens: int
    sent_tokens: int
    sent_count: int
    error: str | None
    counts: dict[str, int]
    reports: list[dict[str, Any]]
    rows: list[tuple[int, int | None, str]]


def call_pack(session: Session, settings: services.ReplaySettings, run: ReplayRun,
              index: int) -> CallPack:
    """The call view of call `index` (from the cache when any process made it before)."""
    query = settings.query()

    def build() -> CallPack:
        detail = services.call_detail(session, settings, run, index)
        reports = [{k: v for k, v in r.items() if k != "report"}
                   for r in report_lines(detail.call)]
        return CallPack(
            index=index,
            raw_tokens=detail.call.raw_tokens,
            sent_tokens=detail.call.sent_tokens,
            sent_count=len(detail.call.sent),
            error=detail.call.error,
            counts=detail.view.counts,
            reports=reports,
            rows=render_rows(call_rows(detail), session_id=session.pk, call_index=index,
                             query=query),
        )

    return REPLAYS.call_pack(ReplayKey.of(session, run.key, index), query, build)
