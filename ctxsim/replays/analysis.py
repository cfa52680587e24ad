"""Reading a replay for people: per-call summaries, message-by-message status, diffs, notes.

Pure Python over the engine's `CallResult`s (no Django), so the web views stay thin and the
rules are tested on their own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.messages import Message, decode_for_display
from ctxsim.pipeline.registry import STAGES
from ctxsim.pipeline.replay import CallResult
from ctxsim.pipeline.stages import ReplayFacts
from ctxsim.pipeline.token_model import TokenModel, call_figures
from ctxsim.replays.alignment import (  # noqa: F401 - the call view's names, read from here
    STATUSES,
    CallView,
    ContentDiff,
    MessageRow,
    call_view,
    content_diff,
)

# Report lists can hold one entry per message; the cached summary keeps their length only.
MAX_LIST_IN_SUMMARY = 20


def call_summary(call: CallResult, recorded: Mapping[str, Any] | None = None,
                 calibration: Calibration | None = None,
                 token_model: TokenModel | None = None) -> dict[str, Any]:
    """The compact per-call record the replay cache keeps (no histories), with the provider's
    recorded usage (`rec`) and the provider's tokens of SPEC §11 (`craw`, `csent`; None when
    the session is uncalibrated): the token model's `real_raw`/`real_sent` when the session
    has a bill (the unit every anchored threshold compares), else the calibration line;
    `pred` is the one-step-ahead prediction of the bill; `inj` (only when there are some) the
    injections the agent recorded apart since the previous call (`CallResult.injected`)."""
    reports = {}
    for run in call.stages:
        report = {}
        for key, value in run.report.items():
            if isinstance(value, list) and len(value) > MAX_LIST_IN_SUMMARY:
                report[key] = value[:MAX_LIST_IN_SUMMARY]
                report[f"{key}_count"] = len(value)
            else:
                report[key] = value
        reports[run.stage] = report
    summary = {
        "i": call.call_index,
        "run": call.run_index,
        "turn": call.loop_turn,
        "resp": call.response_input_index,
        "raw": call.raw_tokens,
        "sent": call.sent_tokens,
        "msgs": len(call.sent),
        "error": call.error,
        "spills": len(call.spills),
        "saved": _savings(call),
        "reports": reports,
        "rec": dict(recorded) if recorded else None,
        **_provider_tokens(call, calibration, token_model),
    }
    if call.injected:
        summary["inj"] = [dict(item) for item in call.injected]
    return summary


def _provider_tokens(call: CallResult, calibration: Calibration | None,
                     token_model: TokenModel | None) -> dict[str, int | None]:
    if token_model is not None and token_model.method == "anchored":
        real = call_figures(token_model, call)
        return {"craw": real["real_raw"], "csent": real["real_sent"],
                "pred": real["real_raw_predicted"]}
    return {"craw": calibration.value(call.raw_tokens) if calibration else None,
            "csent": calibration.value(call.sent_tokens) if calibration else None,
            "pred": None}


# What earlier calls' persistent stages saved (and, negatively, what the anchor adds): listed
# so that, with this call's stages and the dispatch-time cap, savings add up to raw - sent.
CARRIED = "carried"


def _savings(call: CallResult) -> dict[str, int]:
    saved = dict(call.savings)
    for stage, n in call.dispatch_savings.items():  # what each dispatch stage saved so far
        if n:
            saved[stage] = saved.get(stage, 0) + n
    carried = (call.raw_tokens - call.sent_tokens) - sum(saved.values())
    if carried:
        saved[CARRIED] = carried
    return saved


def totals(calls: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Session-level figures from the per-call summaries."""
    saved: dict[str, int] = {}
    fired: dict[str, int] = {}
    for c in calls:
        for stage, n in c["saved"].items():
            saved[stage] = saved.get(stage, 0) + n
        for stage, report in c["reports"].items():
            fired[stage] = fired.get(stage, 0) + _activity(stage, report)
    raw = [c["raw"] for c in calls] or [0]
    sent = [c["sent"] for c in calls] or [0]
    calibrated = [c["csent"] for c in calls if c.get("csent") is not None]
    calibrated_raw = [c["craw"] for c in calls if c.get("craw") is not None]
    return {
        "peak_sent_calibrated": max(calibrated) if calibrated else None,
        "total_sent_calibrated": sum(calibrated) if calibrated else None,
        "peak_raw_calibrated": max(calibrated_raw) if calibrated_raw else None,
        "total_raw_calibrated": sum(calibrated_raw) if calibrated_raw else None,
        "calls": len(calls),
        "peak_raw": max(raw),
        "peak_sent": max(sent),
        "total_raw": sum(raw),
        "total_sent": sum(sent),
        "failed": sum(1 for c in calls if c["error"]),
        "spills": sum(c["spills"] for c in calls),
        "repairs": fired.get("pairing", 0),  # what pairing repair did is its activity
        "saved_by_stage": saved,
        "activity": fired,
    }


def _activity(stage: str, report: Mapping[str, Any]) -> int:
    """How many things a stage did at one call (0 = it did not fire)."""
    definition = STAGES.get(stage)
    return definition.activity(report) if definition is not None else 0


# --- notes: tiers and limits that never fired, and why --------------------------------------


def notes(
    calls: Sequence[Mapping[str, Any]],
    values: Mapping[str, Any],
    stages: Sequence[Sequence[str]],
    messages: Sequence[Message],
) -> list[str]:
    """One sentence per tier or limit of the profile that never fired in this replay, with the
    reason when the replay shows it (each stage's `quiet_note`, in the profile's order)."""
    largest = max((len(m.content) for m in messages if m.role == "tool"), default=0)
    turns = tuple(c["turn"] for c in calls)
    out: list[str] = []
    for stage, _ in stages:
        facts = ReplayFacts(tuple(c["reports"].get(stage, {}) for c in calls), turns, values,
                            largest)
        note = STAGES[stage].quiet_note(facts)
        if note:
            out.append(note)
    return out


# --- the call view (`alignment`): every message of what was sent, with its status -------


def display(data: bytes, limit: int | None = None) -> tuple[str, int]:
    """Text for display (invalid bytes as U+FFFD) cut to `limit` bytes; returns (text, hidden)."""
    if limit is None or len(data) <= limit:
        return decode_for_display(data), 0
    return decode_for_display(data[:limit]), len(data) - limit


# --- recorded vs simulated compactions (SPEC-agents §2.5.0.7, issue 16) ---------------------

# Recorded markers that replace the conversation (a microcompaction only clears results).
CONVERSATION_COMPACTIONS = ("summary", "boundary_only", "compaction_block", "condensation")
PREDICTED_KINDS = ("predicted", "predicted_and_recorded")


def recorded_compaction_calls(calls: Sequence[Mapping[str, Any]],
                              recorded: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The session's recorded compactions (`meta.recorded_compactions`) that replace the
    conversation, each with the call it belongs to: the number of model calls answered
    before its message (SPEC-agents §2.5.0.4, r(i))."""
    answered = sorted(c["resp"] for c in calls if c.get("resp") is not None)
    out = []
    for entry in recorded:
        index = entry.get("message_index")
        if entry.get("kind") not in CONVERSATION_COMPACTIONS or not isinstance(index, int):
            continue
        out.append({**entry, "call_index": bisect_left(answered, index)})
    return out


def predicted_compactions(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The compactions the replay's own thresholds made, in call order, from the stage
    reports' `compaction_events`, with the tokens the stage measured before compacting."""
    out = []
    for c in calls:
        for stage, report in c.get("reports", {}).items():
            for event in report.get("compaction_events") or ():
                if event.get("kind") in PREDICTED_KINDS:
                    out.append({"call_index": event.get("call_index", c["i"]), "stage": stage,
                                "tokens_before": event.get("tokens_before")})
    return out


def recorded_vs_simulated(calls: Sequence[Mapping[str, Any]],
                          recorded: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per recorded compaction beside the call where this replay predicts it:
    `same`, `earlier`, `later` or `none`. The prediction is the replay's first compaction
    after the previous recorded one (and before the next): where the profile, with these
    thresholds, would have compacted instead. Each prediction is used once; the others
    follow as `not_recorded`."""
    marks = recorded_compaction_calls(calls, recorded)
    predicted = predicted_compactions(calls)
    used: set[int] = set()
    rows = []
    for k, mark in enumerate(marks):
        r = mark["call_index"]
        low = marks[k - 1]["call_index"] if k else -1
        high = marks[k + 1]["call_index"] if k + 1 < len(marks) else None
        choices = [n for n, p in enumerate(predicted) if n not in used
                   and (p["call_index"] == r or (low < p["call_index"]
                                                 and (high is None or p["call_index"] < high)))]
        best = min(choices, key=lambda n: predicted[n]["call_index"], default=None)
        row = {"recorded_call": r, "source": mark.get("source"), "trigger": mark.get("trigger"),
               "pre_tokens": mark.get("pre_tokens"),
               "tokens_at_recorded": _tokens_at(calls, r), "predicted_call": None,
               "tokens_at_predicted": None, "relation": "none"}
        if best is not None:
            used.add(best)
            p = predicted[best]["call_index"]
            row.update(predicted_call=p, tokens_at_predicted=predicted[best]["tokens_before"],
                       relation="same" if p == r else "earlier" if p < r else "later")
        rows.append(row)
    for n, p in enumerate(predicted):
        if n not in used:
            rows.append({"recorded_call": None, "source": None, "trigger": None,
                         "pre_tokens": None, "tokens_at_recorded": None,
                         "predicted_call": p["call_index"],
                         "tokens_at_predicted": p["tokens_before"], "relation": "not_recorded"})
    return rows


def _tokens_at(calls: Sequence[Mapping[str, Any]], index: int) -> int | None:
    """What the replay estimated the conversation held at a call before any compaction there:
    the compaction stage's own `tokens_before` when it reports one, else the raw history."""
    if not 0 <= index < len(calls):
        return None
    for report in calls[index].get("reports", {}).values():
        if "compaction_events" in report and isinstance(report.get("tokens_before"), int):
            return report["tokens_before"]
    return calls[index].get("raw")
