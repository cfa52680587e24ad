"""Everything the session page template shows, built from a replay summary and one call.

Kept apart from the views so each view stays parse → build → render, and from `services` so the
replay mechanics and their presentation can change separately.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from django.conf import settings as django_settings

from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.params import PARAMS, ascii_index, resolve_env
from ctxsim.pipeline.registry import FAMILIES, PHASES, STAGES, params_of
from ctxsim.pipeline.usage import context_window
from ctxsim.replays import analysis, rendering, services
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.state import form_value
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.terms import Terms

# Message bodies longer than this are collapsed in the call view ("show all" loads the rest).
COLLAPSE_BYTES = 1200
# Unchanged messages are the bulk of a late call and the least interesting part of it.
COLLAPSE_UNCHANGED_BYTES = 300
# A search hit's message is shown far enough to hold its words, up to this (the search indexes
# a content's first 300,000 characters).
LANDING_MAX_BYTES = 1_200_000
# Savings that are no stage's of this call (see `analysis.CARRIED`), by their summary key.
SAVING_LABELS = {analysis.CARRIED: "Persistent stages at earlier calls"}


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


NUMBERS = ("calibrated", "raw")


def numbers_choice(requested: str | None) -> str:
    """Calibrated numbers by default (SPEC §11); `raw` shows ctxsim's own estimates."""
    return "raw" if requested == "raw" else "calibrated"


def chart_data(run: ReplayRun, selected: int, comment_counts: dict[int, int] | None = None,
               recorded: list[dict[str, Any]] | None = None, numbers: str = "calibrated"):
    """The data the chart script reads (through json_script: never executable). `recorded`
    is the session's `meta.recorded_compactions` (SPEC-agents §2.5.0.5).

    Lines are calibrated estimates when the session is calibrated and `numbers` asks for
    them, else raw estimates; the provider's billed input (SPEC §11) is drawn as points
    beside them (`billed`)."""
    enabled = {s for s, _ in run.stages}
    # The first enabled stage (in registry order) that has a limit line draws it.
    label, limit = next(
        (d.limit_line(run.config) for d in STAGES.values()
         if d.name in enabled and d.limit_line is not None),
        ("", None),
    )
    calibration = run.totals.get("calibration")
    calibrated = bool(calibration) and numbers == "calibrated"
    flagged = [f["call_index"] for f in (calibration or {}).get("flagged", ())]
    model = run.totals.get("model")
    return thin_chart({
        "labels": [c["i"] for c in run.calls],
        "raw": [c["craw"] if calibrated else c["raw"] for c in run.calls],
        "sent": [c["csent"] if calibrated else c["sent"] for c in run.calls],
        "calibrated": calibrated,
        "billed": [(c.get("rec") or {}).get("total_input") for c in run.calls],
        "flagged": flagged,
        "window": context_window(model),
        "model": model,
        "failed": [c["i"] for c in run.calls if c["error"]],
        "spills": [c["i"] for c in run.calls if c["spills"]],
        "comments": comment_counts or {},
        "limit": limit,
        "limitLabel": label,
        "selected": selected,
        "counter": run.counter,
        "predicted": sorted({p["call_index"] for p in analysis.predicted_compactions(run.calls)}),
        "recorded": sorted({r["call_index"] for r in
                            analysis.recorded_compaction_calls(run.calls, recorded or [])}),
    })



# A chart is a few hundred pixels wide: past this many calls, consecutive calls share a point.
CHART_POINTS = 1000
# Chart keys that list calls (by index) rather than hold one value per call.
CHART_CALL_LISTS = ("failed", "spills", "flagged", "predicted", "recorded")


def thin_chart(chart: dict[str, Any], points: int | None = None) -> dict[str, Any]:
    """The chart with at most `points` points (CHART_POINTS): calls are grouped in runs of
    equal length, each drawn as its highest value of every per-call series, at one call of
    the run — the selected call, else a failed one, else the one that sent the most — so a
    click opens a call the point stands for and failures are never hidden. Every list as
    long as `labels` is a per-call series (series added later follow without change)."""
    points = points or CHART_POINTS
    labels = chart["labels"]
    n = len(labels)
    if n <= points:
        return chart
    size = -(-n // points)
    failed = set(chart["failed"])
    series = [k for k, v in chart.items() if k != "labels" and isinstance(v, list)
              and len(v) == n and k not in CHART_CALL_LISTS]
    out = {k: v for k, v in chart.items() if k not in series and k != "labels"}
    out["labels"] = []
    for k in series:
        out[k] = []
    rep_of: dict[int, int] = {}
    sent = chart.get("sent") or [0] * n
    for start in range(0, n, size):
        group = range(start, min(start + size, n))
        chosen = next((i for i in group if labels[i] == chart["selected"]), None)
        if chosen is None:
            chosen = next((i for i in group if labels[i] in failed), None)
        if chosen is None:
            chosen = max(group, key=lambda i: (sent[i] or 0, i))
        out["labels"].append(labels[chosen])
        for k in series:
            values = [chart[k][i] for i in group if chart[k][i] is not None]
            out[k].append(max(values) if values else None)
        for i in group:
            rep_of[labels[i]] = labels[chosen]
    for k in CHART_CALL_LISTS:
        if k in chart:
            out[k] = list(dict.fromkeys(rep_of[i] for i in chart[k] if i in rep_of))
    comments: dict[Any, int] = {}
    for call, count in (chart.get("comments") or {}).items():
        rep = rep_of.get(int(call), int(call))
        comments[rep] = comments.get(rep, 0) + count
    out["comments"] = comments
    out["grouped"] = size
    return out


def calibration_summary(run: ReplayRun) -> dict[str, Any] | None:
    """The calibration in the page's words (None: the session records no usage)."""
    cal = run.totals.get("calibration")
    if not cal:
        return None
    sd = cal.get("residual_sd")
    method = {"theil-sen": "robust fit (Theil–Sen)", "table": "first call + dated factor table",
              "two-point": "two calls", "offset": "first call only"}.get(cal["method"],
                                                                         cal["method"])
    quality = f"{method} over {cal['calls_used']} calls with recorded usage"
    if sd is not None:
        quality += f", residual SD {round(sd):,} tokens"
    accuracy = ((run.totals.get("token_model") or {}).get("accuracy") or {})
    note = ""
    if cal["a"] < 0:
        note = ("a is negative: ctxsim counts more than the provider billed for something every "
                "request carries (an image counted as base64/4, for instance; see Image rule)")
    return {
        **cal,
        "note": note,
        "a_tokens": round(cal["a"]),
        "line": f"a = {round(cal['a']):,} tokens the transcript does not show (system prompt, "
                f"tools) · b = {cal['b']:.2f} (tokenizer factor)",
        "quality": quality,
        "accuracy": _accuracy_line(accuracy),
    }


def _accuracy_line(accuracy: dict[str, Any]) -> str:
    """The token model's honest accuracy (SPEC §11): each bill predicted from the earlier
    ones only, shown beside the in-sample fit."""
    if not accuracy.get("calls") or accuracy.get("one_step_median") is None:
        return ""
    line = (f"One step ahead (each bill predicted from earlier calls only): median "
            f"{accuracy['one_step_median']:.2%}, p90 {accuracy['one_step_p90']:.2%} over "
            f"{accuracy['calls']:,} calls")
    if accuracy.get("step_median") is not None:
        line += (f"; what a call added (steps of 1,000 tokens or more): median "
                 f"{accuracy['step_median']:.1%}, p90 {accuracy['step_p90']:.1%}")
    return line


def numbers_unit(run: ReplayRun, numbers: str = "calibrated") -> str:
    """The unit of the page's numbers: "real" (the provider's tokens, anchored on the bill:
    the unit anchored thresholds compare), "calibrated" (the calibration line) or "raw"."""
    if numbers == "raw" or not run.totals.get("calibration"):
        return "raw"
    model = run.totals.get("token_model") or {}
    return "real" if model.get("method") == "anchored" else "calibrated"


UNIT_LABELS = {"real": "provider's tokens", "calibrated": "calibrated",
               "raw": "ctxsim's estimate"}


def summary(run: ReplayRun, numbers: str = "calibrated") -> dict[str, Any]:
    t = run.totals
    saved = sorted(t["saved_by_stage"].items(), key=lambda kv: -kv[1])
    calibrated = bool(t.get("calibration")) and numbers == "calibrated"
    unit = numbers_unit(run, numbers)
    # Savings in the unit of the page: the provider's tokens of what was removed are b times
    # ctxsim's count of it (the token model's factor; SPEC §11).
    factor = ((t.get("token_model") or {}).get("tokenizer") or {}).get("b", 1.0) \
        if unit == "real" else 1.0
    saved = [(stage, round(n * factor)) for stage, n in saved]
    return {
        **t,
        "calibrated": calibrated,
        "unit": unit,
        "unit_label": UNIT_LABELS[unit],
        "calibration_view": calibration_summary(run),
        "shown_peak_sent": t.get("peak_sent_calibrated") if calibrated else t["peak_sent"],
        "shown_total_sent": t.get("total_sent_calibrated") if calibrated else t["total_sent"],
        "shown_peak_raw": t.get("peak_raw_calibrated") if calibrated else t["peak_raw"],
        "shown_total_raw": t.get("total_raw_calibrated") if calibrated else t["total_raw"],
        "saved_total": sum(n for _, n in saved) if unit == "real"
        else t["total_raw"] - t["total_sent"],
        "saved_list": [{"stage": s, "label": _saving_label(s), "tokens": n,
                        "share": (n / t["total_raw"] * 100) if t["total_raw"] else 0}
                       for s, n in saved],
    }


def _saving_label(stage: str) -> str:
    if stage in STAGES:
        return STAGES[stage].label
    return SAVING_LABELS.get(stage, stage)


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
           "unit_label": UNIT_LABELS[numbers_unit(run)], "predicted": c.get("pred")}
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


def compare_chart(sides, selected: int) -> dict[str, Any]:
    first = sides[0].run
    # One unit for both sides, the session page's: the provider's tokens when both have them.
    real = all(numbers_unit(s.run) != "raw" for s in sides)

    def shown(c: dict[str, Any], key: str) -> Any:
        return c[f"c{key}"] if real and c.get(f"c{key}") is not None else c[key]

    return {
        "labels": [c["i"] for c in first.calls],
        "raw": [shown(c, "raw") for c in first.calls],
        "series": [{"label": s.settings.profile.name,
                    "sent": [shown(c, "sent") for c in s.run.calls],
                    "failed": [c["i"] for c in s.run.calls if c["error"]]} for s in sides],
        "selected": selected,
        "counter": first.counter,
        "unit": UNIT_LABELS[numbers_unit(first) if real else "raw"],
    }


def compare_column(session: Session, side, call: int, user: Any = None) -> dict[str, Any]:
    """One side of the comparison: its summary and what it sent at the chosen call."""
    index = min(call, len(side.run.calls) - 1)
    if (session.model_call_count > django_settings.CTXSIM_INLINE_REPLAY_CALLS
            and not services.call_is_at_hand(session, side.settings, index)):
        # A long session is never replayed by the request (issue 28 item 4): the call's
        # figures from the stored summary; its messages are on the session page.
        figures = side.run.calls[index]
        return {"side": side, "summary": summary(side.run), "rows": [], "counts": {},
                "call": SimpleNamespace(sent_tokens=figures["sent"], error=figures["error"]),
                "reports": [], "messages_elsewhere": True}
    detail = services.call_detail(session, side.settings, side.run, index, user)
    return {"side": side, "summary": summary(side.run), "rows": call_rows(detail),
            "counts": detail.view.counts, "call": detail.call,
            "reports": report_lines(detail.call)}


def compactions_context(run: ReplayRun, recorded: list[dict[str, Any]] | None,
                        call: int, numbers: str = "calibrated") -> dict[str, Any]:
    """The "recorded vs simulated compactions" list and what the agent recorded at `call`.

    ctxsim's estimates at the recorded and the predicted call are calibrated (SPEC §11) when
    the session is and `numbers` asks for it, so they compare with the agent's own count;
    `compaction_numbers` says which they are."""
    # Read from every call's reports: once per summary this process keeps, not at each step
    # (at 16,000 calls it was a tenth of one, issue 31). A run is of one session: `recorded`
    # is its session's.
    memo = vars(run).setdefault("_compactions", {})
    if numbers not in memo:
        memo[numbers] = _compactions(run, recorded or [], numbers)
    marks, rows, unit = memo[numbers]
    return {
        "compaction_rows": rows,
        "compaction_numbers": unit,
        "recorded_here": [{**m, "pre_tokens_text": _thousands(m.get("pre_tokens"))}
                          for m in marks if m["call_index"] == call],
    }


def _compactions(run: ReplayRun, recorded: list[dict[str, Any]], numbers: str):
    marks = analysis.recorded_compaction_calls(run.calls, recorded) if recorded else []
    rows = analysis.recorded_vs_simulated(run.calls, recorded) if marks else []
    calibration = Calibration.from_json(run.totals.get("calibration"))
    # A stage measuring in recorded usage, or anchored on the bill, already counts what the
    # provider billed.
    billed = any(STAGES[s].measures_billed(run.config) for s, _ in run.stages
                 if s in STAGES and STAGES[s].measures_billed is not None)
    anchored = any(r.get("token_unit") == "provider" for c in run.calls
                   for r in c["reports"].values())
    shown = calibration.value if calibration and numbers == "calibrated" and not (
        billed or anchored) else _same
    for row in rows:
        row["at_recorded"] = shown(row["tokens_at_recorded"])
        row["at_predicted"] = shown(row["tokens_at_predicted"])
    unit = ("billed" if billed else "provider" if anchored
            else "uncalibrated" if calibration is None
            else "calibrated" if numbers == "calibrated" else "raw")
    return marks, rows, unit


def _same(n: int | None) -> int | None:
    return n


def _thousands(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else ""

