"""Everything the session page template shows, built from a replay summary and one call.

Kept apart from the views so each view stays parse → build → render, and from `services` so the
replay mechanics and their presentation can change separately.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.params import PARAMS, ascii_index, resolve_env
from ctxsim.pipeline.registry import FAMILIES, PHASES, STAGES, params_of
from ctxsim.replays import analysis, rendering, services
from ctxsim.replays.codecs import form_value
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.run_figures import UNIT_LABELS, numbers_unit
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.terms import Terms

# Message bodies longer than this are collapsed in the call view ("show all" loads the rest).
COLLAPSE_BYTES = 1200
# Unchanged messages are the bulk of a late call and the least interesting part of it.
COLLAPSE_UNCHANGED_BYTES = 300
# A search hit's message is shown far enough to hold its words, up to this (the search indexes
# a content's first 300,000 characters).
LANDING_MAX_BYTES = 1_200_000


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
    optional: bool = False  # None is a value of its own (an "object" offers "none")
    note: str = ""  # "ctxsim's default; not documented by …" ([X], SPEC-agents §2.5.0.1)
    example: str = ""  # the placeholder of an empty field, in the value's own syntax
    bounds: tuple[int, int] | None = None  # a number's min and max, where its check has them


def form_fields(settings: services.ReplaySettings, errors: dict[str, str]) -> list[Field]:
    """The thresholds form, generated from the typed parameters of the profile's stages."""
    rc = settings.run_config()
    fields = []
    shown = params_of(rc.stages) | {"counter"}
    for name in (n for n in PARAMS if n in shown):  # the parameter table's order
        spec = PARAMS[name]
        value = rc.values.get(name)
        field = Field(name, spec.label, spec.kind, value, spec.help, spec.unit, spec.choices,
                      error=errors.get(name, ""), optional=spec.default is None,
                      note=_era_note(settings, name) or settings.profile.default_note(name),
                      example=spec.example, bounds=getattr(spec.validate, "bounds", None))
        if spec.kind == "env":
            typed = rc.values.get("env") or {}
            env = resolve_env(typed)
            field.env_vars = [
                {"name": var.name, "label": var.label, "help": var.help, "default": var.default,
                 "unit": var.unit,
                 "typed": typed.get(var.name, ""), "effective": env[var.name].effective,
                 "warning": env[var.name].warning}
                for var in spec.env_vars
            ]
        else:
            field.value = form_value(spec, value)
        fields.append(field)
    return fields


def _era_note(settings: services.ReplaySettings, name: str) -> str:
    """"From the release: Claude Code 1.0.17 (before 2.1.2): …" for a value the transcript's
    release sets (SPEC-agents §2.5.0.11), unless the profile or the user set it."""
    era = settings.era
    if era is None or name not in era.params or name in settings.config \
            or name in settings.profile.params:
        return ""
    return "From the release: " + era.source_of(name)


def stage_rows(settings: services.ReplaySettings) -> list[dict[str, Any]]:
    """One row per registered stage: enabled?, its phase and position, the allowed phases."""
    current = list(settings.effective_stages)
    rows = []
    for name, definition in STAGES.items():
        entry = next(((i, p) for i, (s, p) in enumerate(current) if s == name), None)
        rows.append({
            "name": name, "label": definition.label, "help": definition.help,
            "note": _defaults_note(settings, definition.params),
            "family": FAMILIES[definition.family].label if definition.family in FAMILIES
            else definition.family,
            "enabled": entry is not None,
            "phase": entry[1] if entry else definition.phases[0],
            "order": (entry[0] + 1) * 10 if entry else 99,
            "phases": definition.phases,
        })
    rows.sort(key=lambda r: (not r["enabled"], r["order"]))
    return rows


def _defaults_note(settings: services.ReplaySettings, names) -> str:
    """Which of these parameters run on ctxsim's own [X] defaults under the profile, grouped
    by the vendor that does not document them: "ctxsim's defaults; not documented by
    Anthropic: Shell tools, Preview cut"."""
    by_note: dict[str, list[str]] = {}
    for name in (n for n in PARAMS if n in set(names)):  # form order
        note = settings.profile.default_note(name)
        if note:
            by_note.setdefault(note.replace("default;", "defaults;"), []).append(
                PARAMS[name].label)
    return " · ".join(f"{note}: {', '.join(labels)}" for note, labels in by_note.items())


def call_rows(detail: services.CallDetail, positions: Iterable[int] | None = None,
              reach: Terms | None = None) -> list[dict[str, Any]]:
    """Call-view rows (all, or those at `positions`) with their display text, collapsed past
    COLLAPSE_BYTES (or, with `reach`, past the first occurrence of every term: a search hit).

    A message rewritten before this call and sent as this call's stages found it (a
    microcompact stub kept in the history, a result capped as it entered) shows what is sent,
    with its diff one click away: late calls carry hundreds of them, and their diffs made most
    of the call view's weight."""
    rows = []
    every = detail.view.rows
    chosen = range(len(every)) if positions is None else positions
    for position in chosen:
        row = every[position]
        quiet = row.status == "unchanged" or row.carried
        shown, json_view = tool_output(row.message)
        limit = COLLAPSE_UNCHANGED_BYTES if quiet else COLLAPSE_BYTES
        if reach is not None:
            limit = _reaching(shown, reach, limit)
        text, hidden = analysis.display(shown, limit)
        entry = {"row": row, "index": position, "text": text, "hidden": hidden,
                 "calls": row.message.tool_calls, "delta": row.tokens - row.raw_tokens,
                 "carried": row.carried, "json": json_view}
        if row.diff is not None:  # carried rows have none (see `analysis.call_view`)
            entry["diff"] = diff_entry(row.diff)
        rows.append(entry)
    return rows


def _reaching(data: bytes, reach: Terms, limit: int) -> int:
    """A cut of `data` past the first occurrence of every term of `reach` (and COLLAPSE_BYTES
    more), never shorter than `limit` nor longer than LANDING_MAX_BYTES."""
    if len(data) <= limit:
        return limit
    text = analysis.display(data, LANDING_MAX_BYTES)[0]
    spans = reach.found_spans(text)
    if not spans:
        return limit
    end = len(text[:max(e for _s, e in spans)].encode())
    return min(max(limit, end + COLLAPSE_BYTES), LANDING_MAX_BYTES)


# The JSON view behind a tool output shown as its text is cut here.
JSON_VIEW_BYTES = 4000


def tool_output(message) -> tuple[bytes, str]:
    """What the call view shows of a message: a tool result that is JSON carrying a text
    (`rendering.json_text`) as that text, with the JSON (its first JSON_VIEW_BYTES) for the
    view one click away; anything else as it is, with no JSON view ("")."""
    found = rendering.json_text(message.content) if message.role == "tool" else None
    if found is None:
        return message.content, ""
    text, value = found
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    cut = pretty if len(pretty) <= JSON_VIEW_BYTES else pretty[:JSON_VIEW_BYTES] + "\n…"
    return text.encode("utf-8", "surrogatepass"), cut


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


def describe(stage: str, report: dict[str, Any]) -> str:
    """The stage's report at one call in one sentence (`StageDef.describe`)."""
    return STAGES[stage].describe(report)


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


def call_usage(run: ReplayRun, index: int) -> dict[str, Any]:
    """What the call view says about the provider's figures for one call (SPEC §11)."""
    c = run.calls[index] if run.calls else {}
    flagged = {f["call_index"]: f for f in (run.totals.get("calibration") or {}).get(
        "flagged", ())}
    recorded = c.get("rec")
    out = {"recorded": recorded, "calibrated_raw": c.get("craw"), "calibrated_sent":
           c.get("csent"), "flag": flagged.get(index), "trailing": c.get("resp") is None,
           "uncalibrated": not run.totals.get("calibration"),
           "unit_label": UNIT_LABELS[numbers_unit(run)], "predicted": c.get("pred"),
           "injected": c.get("inj") or ()}
    calibration = Calibration.from_json(run.totals.get("calibration"))
    if recorded and calibration is not None and c.get("raw") is not None:
        # The in-sample line (what a flag measures), not the anchored figure (the bill).
        out["difference"] = recorded["total_input"] - (calibration.value(c["raw"]) or 0)
    if recorded and c.get("pred") is not None:
        out["predicted_off"] = recorded["total_input"] - c["pred"]
    return out


def neighbours(run: ReplayRun, index: int) -> tuple[int | None, int | None]:
    return (index - 1 if index > 0 else None,
            index + 1 if index + 1 < len(run.calls) else None)


def session_facts(session: Session) -> list[tuple[str, Any]]:
    return [("Format", session.format), ("Messages", session.message_count),
            ("Model calls", session.model_call_count), ("Tool calls", session.tool_call_count),
            ("Tool results", session.tool_result_count),
            ("Error results", session.error_result_count)]
