"""The whole replay as the session and compare pages show it: the summary and its unit, the
chart (grouped past CHART_POINTS calls), the calibration in the page's words, and the recorded
against simulated compactions. Read from a stored replay summary (`ReplayRun`), never from a
replay: what a page shows of the whole session does not grow with the call it shows.
"""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.registry import STAGES
from ctxsim.pipeline.usage import context_window
from ctxsim.replays import analysis
from ctxsim.replays.models import ReplayRun

# Savings that are no stage's of this call (see `analysis.CARRIED`), by their summary key.
SAVING_LABELS = {analysis.CARRIED: "Persistent stages at earlier calls"}


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
