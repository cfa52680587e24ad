"""Reading a replay for people: per-call summaries, message-by-message status, diffs, notes.

Pure Python over the engine's `CallResult`s (no Django), so the web views stay thin and the
rules are tested on their own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.messages import Message, decode_for_display
from ctxsim.pipeline.registry import STAGES
from ctxsim.pipeline.replay import CallResult
from ctxsim.pipeline.stages import ReplayFacts
from ctxsim.pipeline.token_model import TokenModel, call_figures

# Report lists can hold one entry per message; the cached summary keeps their length only.
MAX_LIST_IN_SUMMARY = 20

STATUSES = ("unchanged", "rewritten", "spilled", "removed", "injected")


def call_summary(call: CallResult, recorded: Mapping[str, Any] | None = None,
                 calibration: Calibration | None = None,
                 token_model: TokenModel | None = None) -> dict[str, Any]:
    """The compact per-call record the replay cache keeps (no histories), with the provider's
    recorded usage (`rec`) and the provider's tokens of SPEC §11 (`craw`, `csent`; None when
    the session is uncalibrated): the token model's `real_raw`/`real_sent` when the session
    has a bill (the unit every anchored threshold compares), else the calibration line;
    `pred` is the one-step-ahead prediction of the bill."""
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
    return {
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


# --- the call view: every message of what was sent, with its status --------------------------


@dataclass
class MessageRow:
    """One row of the call view."""

    status: str
    message: Message  # what was sent (for removed rows: the raw message)
    raw: Message | None
    sent_position: int | None
    stage: str = ""  # the stage that changed, removed or injected it
    tokens: int = 0
    raw_tokens: int = 0
    tool_name: str = ""
    spill: Any = None  # the spill record whose path the preview names
    diff: ContentDiff | None = None
    # Rewritten before this call (an earlier call's persistent stage, or the dispatch cap) and
    # sent as this call's stages found it; for a removed row, removed at an earlier call.
    carried: bool = False

    @property
    def origin(self) -> int | None:
        return self.message.origin


@dataclass
class ContentDiff:
    """old = prefix + removed + suffix, new = prefix + added + suffix (bytes)."""

    prefix: bytes
    removed: bytes
    added: bytes
    suffix: bytes

    @property
    def removed_bytes(self) -> int:
        return len(self.removed)


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix, by bisection over slice comparisons (done in C): a
    character loop over 90 KB results made the call view's diffs its slowest part."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def content_diff(old: bytes, new: bytes) -> ContentDiff:
    """Common head and tail kept, the middle shown as removed/added: exactly how truncation
    previews, spills and summaries rewrite a result."""
    head = _common_prefix(old, new)
    tail = _common_suffix(old, new, min(len(old), len(new)) - head)
    return ContentDiff(
        prefix=old[:head],
        removed=old[head : len(old) - tail],
        added=new[head : len(new) - tail],
        suffix=old[len(old) - tail :] if tail else b"",
    )


@dataclass
class CallView:
    rows: list[MessageRow] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _by_origin(history: Iterable[Message]) -> dict[int, Message]:
    out: dict[int, Message] = {}
    for m in history:
        if m.origin is not None and m.origin not in out:
            out[m.origin] = m
    return out


def _changed(a: Message, b: Message) -> bool:
    return a.content != b.content or a.tool_calls != b.tool_calls


def call_view(
    call: CallResult,
    cost: Callable[[Message], int],
    capped_at_dispatch: Iterable[int] = (),
) -> CallView:
    """Align what was sent at one call with the raw history, message by message.

    `cost` is the replay's own measure of a message (`Replay.cost`): every message a call
    shows was measured by the replay that made it, so a view never counts one again (issue 31:
    a step at 16,000 calls spent 27.6 of 28.3 s recounting raw messages).

    Invariant: every raw message appears exactly once (sent as is, rewritten, spilled or
    removed) and every sent message without an origin is marked injected.
    """
    raw_by_origin = _by_origin(call.raw_history)
    started = _by_origin(call.input_history)
    sent_origins = {m.origin for m in call.sent if m.origin is not None}
    capped = set(capped_at_dispatch)
    names = {c.id: c.name for m in call.raw_history for c in m.tool_calls}
    # Which stage first changed / removed each message at this call.
    stage_of: dict[int, str] = {}
    removed_by: dict[int, str] = {}
    previous = raw_by_origin
    for run in call.stages:
        current = _by_origin(run.history)
        for origin, before in previous.items():
            after = current.get(origin)
            if after is None:
                removed_by.setdefault(origin, run.stage)
            elif _changed(before, after) and origin not in stage_of:
                stage_of[origin] = "tool_cap" if origin in capped else run.stage
        previous = current
    spill_paths = [(s.path.encode("utf-8", "surrogatepass"), s) for s in call.spills]

    rows: list[MessageRow] = []
    removed = sorted(o for o in raw_by_origin if o not in sent_origins)
    r = 0
    for position, m in enumerate(call.sent):
        while r < len(removed) and m.origin is not None and removed[r] < m.origin:
            rows.append(_removed_row(raw_by_origin[removed[r]], removed_by, cost, names,
                                     started))
            r += 1
        raw = raw_by_origin.get(m.origin) if m.origin is not None else None
        row = MessageRow(
            status="unchanged",
            message=m,
            raw=raw,
            sent_position=position,
            tokens=cost(m),
            tool_name=names.get(m.tool_call_id, "") if m.role == "tool" else "",
        )
        if raw is None:
            row.status = "injected"
            row.stage = "pairing" if m.role == "tool" else "anchor"
        else:
            row.raw_tokens = cost(raw)
            if _changed(raw, m):
                row.stage = stage_of.get(m.origin, "tool_cap" if m.origin in capped else "")
                row.status = "rewritten"
                for path, record in spill_paths:
                    if path in m.content:
                        row.status, row.spill = "spilled", record
                        break
                before = started.get(m.origin)
                row.carried = before is not None and not _changed(before, m)
                if not row.carried:  # a carried row's diff is asked for on its own
                    row.diff = content_diff(raw.content, m.content)
        rows.append(row)
    for origin in removed[r:]:
        rows.append(_removed_row(raw_by_origin[origin], removed_by, cost, names, started))
    counts = dict.fromkeys(STATUSES, 0)
    for row in rows:
        counts[row.status] += 1
    return CallView(rows, counts)


def _removed_row(raw: Message, removed_by, cost, names, started) -> MessageRow:
    # Gone from the history this call started from: removed at an earlier call (carried).
    return MessageRow(
        carried=raw.origin not in started,
        status="removed",
        message=raw,
        raw=raw,
        sent_position=None,
        stage=removed_by.get(raw.origin, ""),
        raw_tokens=cost(raw),
        tool_name=names.get(raw.tool_call_id, "") if raw.role == "tool" else "",
    )


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
