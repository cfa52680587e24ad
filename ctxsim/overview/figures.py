"""A session's overview figures under one profile and cache rule, and their sums.

`session_figures` replays the session once and reads the replay twice over: the prompt-cache
model and information loss (`ctxsim.insights.report.analyse`, exactly what the session's own
cache & information-loss page shows) and the tokens each tool's results take in what was sent.
`aggregate` sums the figures of many sessions; every derived rate is computed from the sums,
never averaged, so a total equals the sum of the sessions' own figures.

What the provider billed (SPEC §11) comes from the transcript's recorded usage, priced with
the same cache rule (`ctxsim.insights.recorded`); the calibrated figures apply the session's
calibration (`a + b × estimate`) to each sent call's tokens, and scale that call's
cache-adjusted cost by the same ratio. Savings against what was billed compare the recorded
cost with the calibrated simulated cost over the calls that have a recorded usage (or, when
the file records only session totals, over the whole session).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ctxsim.analysis.choices import CacheChoice
from ctxsim.analysis.results import rule_key
from ctxsim.insights.prices import CacheRule
from ctxsim.insights.recorded import recorded_call
from ctxsim.insights.report import analyse, as_data
from ctxsim.pipeline.calibration import Calibration
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult, replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.pipeline.token_model import call_figures
from ctxsim.pipeline.tokens import TokenCounter, tokens_by_identity
from ctxsim.pipeline.trace import replay_calibration
from ctxsim.pipeline.usage import call_recorded
from ctxsim.replays import services as replays
from ctxsim.replays.state import ReplaySettings
from ctxsim.replays.token_counts import save_counts

# Bump when the figures change meaning: figures stored under another version are not read.
FIGURES_VERSION = 3  # 3: calibrated sent tokens are the token model's

# Summed over sessions as they are.
SIMULATED = ("sessions", "calls", "failed", "raw_tokens", "sent_tokens", "cached_tokens",
             "cost", "no_cache_cost", "loss_events", "lost_references", "rereads")
BILLED = (
    # what the provider billed (sessions with recorded usage)
    "recorded_sessions", "recorded_calls", "recorded_input_tokens", "recorded_cached_tokens",
    "recorded_cost",
    # the simulation calibrated to what was billed (calibrated sessions)
    "calibrated_sessions", "calibrated_sent_tokens", "calibrated_cost",
    # recorded against calibrated, over the same calls (sessions with both)
    "billed_sessions", "billed_input_tokens", "billed_cost", "matched_sent_tokens",
    "matched_cost",
)
SUMMED = SIMULATED + BILLED
UNKNOWN_TOOL = "(unnamed tool)"


def figures_key(settings: ReplaySettings, cache: CacheChoice) -> tuple[str, str]:
    """Where a session's figures are stored: its result's (run key, cache rule) in
    `ctxsim.analysis.models.SessionResult`, equal for settings that replay alike under the
    same rule (see `ReplaySettings.key`); the figures are read only under `FIGURES_VERSION`."""
    return settings.key, rule_key(cache.rule())


class _Observed:
    """A replay whose calls are also handed to `observe` as `analyse` consumes them, so one
    replay feeds both readings."""

    def __init__(self, rep: Any, observe: Callable[[CallResult, Any], None]) -> None:
        self._rep = rep
        self._observe = observe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rep, name)

    def calls(self) -> Iterator[CallResult]:
        for call in self._rep.calls():
            self._observe(call, self._rep.token_model)
            yield call


class _CallTally:
    """Raw tokens and peaks of the calls that were sent, and per tool the tokens its results
    took in what was sent, summed over those calls."""

    def __init__(self, messages: Sequence[Message], counter: TokenCounter,
                 image_rule: str) -> None:
        self.messages = messages
        self.names = {tc.id: tc.name for m in messages for tc in m.tool_calls}
        self.counter = counter
        self.image_rule = image_rule
        self.recorded: dict[int, dict[str, Any]] = {}  # call index -> its recorded usage
        self.real_sent: dict[int, int | None] = {}  # call index -> the token model's figure
        self.by_tool: dict[str, int] = {}
        self.raw_tokens = 0
        self.peak_sent = 0
        self.peak_raw = 0
        # The engine shares unchanged messages between calls: count each object once.
        self._tokens: dict[int, tuple[Message, int]] = {}
        # Per tool, the tokens its results take in the latest call's prompt (`_sent`), kept
        # up to date from what changed at each call (`CallResult.sent_kept`): summing the
        # whole prompt at every call made the overview quadratic (issue 31).
        self._sent: Sequence[Message] = ()
        self._in_sent: dict[str, int] = {}

    def _count(self, m: Message) -> int:
        return tokens_by_identity(self._tokens, m, self.counter, self.image_rule)

    def _add(self, history: Sequence[Message], start: int, sign: int) -> None:
        in_sent = self._in_sent
        for i in range(start, len(history)):
            m = history[i]
            if m.role == "tool":
                name = self.names.get(m.tool_call_id) or m.name or UNKNOWN_TOOL
                in_sent[name] = in_sent.get(name, 0) + sign * self._count(m)

    def __call__(self, call: CallResult, token_model: Any = None) -> None:
        recorded = call_recorded(self.messages, call.response_input_index)
        if recorded:
            self.recorded[call.call_index] = recorded
        if token_model is not None and token_model.method == "anchored":
            # The provider's tokens of what was sent (SPEC §11), as the session page shows.
            self.real_sent[call.call_index] = call_figures(token_model, call)["real_sent"]
        self.peak_raw = max(self.peak_raw, call.raw_tokens)
        kept = call.sent_kept
        if kept is None or kept > len(self._sent):
            self._in_sent, kept = {}, 0
        else:
            self._add(self._sent, kept, -1)
        self._add(call.sent, kept, 1)
        self._sent = call.sent
        if call.error:
            return
        self.raw_tokens += call.raw_tokens
        self.peak_sent = max(self.peak_sent, call.sent_tokens)
        for name, tokens in self._in_sent.items():
            if tokens or name in self.by_tool:
                self.by_tool[name] = self.by_tool.get(name, 0) + tokens


def session_figures(session, settings: ReplaySettings,
                    cache: CacheChoice) -> tuple[dict[str, Any], dict[str, Any]]:
    """Replay a stored session under `settings` and return its figures and the insights
    report of the same replay (`ctxsim.insights.report.as_data`), both JSON-ready."""
    canonical = replays.canonical_session(session, settings.counter, other_counts=True)
    rep = replay(canonical, settings.run_config(), sink=NullSpillSink())
    tally = _CallTally(canonical.messages, rep.counter, rep.image_rule)
    rule = cache.rule()
    # What this replay tokenizes is stored for the session, as the session page's replays do:
    # opening the session later (in any process) does not tokenize it again.
    with rep.counter.recording() as fresh:
        insights = analyse(_Observed(rep, tally), rule)  # type: ignore[arg-type]
        calibration = replay_calibration(rep)
    save_counts(session, canonical, rep.counter, fresh)
    lost, rereads = len(insights.loss.lost), len(insights.loss.rereads)
    out = {
        "sessions": 1,
        "calls": len(insights.calls),
        "failed": sum(1 for c in insights.calls if c.failed),
        "raw_tokens": tally.raw_tokens,
        "sent_tokens": insights.input_tokens,
        "cached_tokens": insights.cached_tokens,
        "cost": insights.cost,
        "no_cache_cost": insights.no_cache_cost,
        "loss_events": lost + rereads,
        "lost_references": lost,
        "rereads": rereads,
        "peak_sent": tally.peak_sent,
        "peak_raw": tally.peak_raw,
        "by_tool": tally.by_tool,
    }
    out.update(_billed(insights.calls, tally.recorded, canonical.meta.get("recorded_totals"),
                       calibration, rule, tally.real_sent))
    return out, as_data(insights)


def _billed(rows: Sequence[Any], per_call: Mapping[int, Mapping[str, Any]],
            session_totals: Mapping[str, Any] | None, calibration: Calibration | None,
            rule: CacheRule, real_sent: Mapping[int, int | None] | None = None
            ) -> dict[str, Any]:
    """The recorded and calibrated figures of one session (see the module docstring)."""
    out: dict[str, Any] = dict.fromkeys(BILLED, 0)
    real_sent = real_sent or {}
    calibrated: dict[int, tuple[int, float]] = {}  # call -> (tokens, cost), calibrated
    if calibration is not None:
        for row in rows:
            if row.failed:
                continue
            real = real_sent.get(row.index)
            tokens = real if real is not None else calibration.value(row.input_tokens) or 0
            ratio = tokens / row.input_tokens if row.input_tokens else 0.0
            calibrated[row.index] = (tokens, row.cost * ratio)
        out["calibrated_sessions"] = 1
        out["calibrated_sent_tokens"] = sum(t for t, _ in calibrated.values())
        out["calibrated_cost"] = sum(c for _, c in calibrated.values())
    if per_call:
        priced = [recorded_call(i, r, rule) for i, r in sorted(per_call.items())]
        matched = [calibrated.get(i, (0, 0.0)) for i in sorted(per_call)]
    elif session_totals and session_totals.get("total_input"):
        priced = [recorded_call(0, session_totals, rule)]
        matched = list(calibrated.values())
    else:
        return out
    # (With session totals only, the calls with usage are unknown: 0.)
    out.update(recorded_sessions=1, recorded_calls=len(per_call),
               recorded_input_tokens=sum(p.input_tokens for p in priced),
               recorded_cached_tokens=sum(p.cached for p in priced),
               recorded_cost=sum(p.cost for p in priced))
    if calibration is not None:
        out.update(billed_sessions=1, billed_input_tokens=out["recorded_input_tokens"],
                   billed_cost=out["recorded_cost"],
                   matched_sent_tokens=sum(t for t, _ in matched),
                   matched_cost=sum(c for _, c in matched))
    return out


def aggregate(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sums of many sessions' figures, with the rates derived from the sums."""
    out: dict[str, Any] = dict.fromkeys(SUMMED, 0)
    by_tool: dict[str, int] = {}
    peaks: list[int] = []
    for fig in rows:
        for name in SUMMED:
            out[name] += fig.get(name, 0)
        for tool, n in fig.get("by_tool", {}).items():
            by_tool[tool] = by_tool.get(tool, 0) + n
        peaks.append(fig.get("peak_sent", 0))
    for name in ("cost", "no_cache_cost", "recorded_cost", "calibrated_cost", "billed_cost",
                 "matched_cost"):
        out[name] = round(out[name], 9)
    out["by_tool"] = by_tool
    out["peaks"] = peaks
    out["hit_rate"] = out["cached_tokens"] / out["sent_tokens"] if out["sent_tokens"] else 0.0
    out["saved_tokens"] = out["raw_tokens"] - out["sent_tokens"]
    out["saved_share"] = out["saved_tokens"] / out["raw_tokens"] if out["raw_tokens"] else 0.0
    out["recorded_hit_rate"] = (out["recorded_cached_tokens"] / out["recorded_input_tokens"]
                                if out["recorded_input_tokens"] else None)
    # Against what the provider billed, over the same calls (sessions with both).
    out["billed_saved_tokens"] = out["billed_input_tokens"] - out["matched_sent_tokens"]
    out["billed_saved_cost"] = round(out["billed_cost"] - out["matched_cost"], 9)
    sent_calls = out["calls"] - out["failed"]
    out["loss_per_100"] = out["loss_events"] * 100 / sent_calls if sent_calls else 0.0
    return out


def histogram(peak_lists: Sequence[Sequence[int]], bins: int = 10) -> dict[str, Any]:
    """Peak context per session, in `bins` equal bins shared by every list (one per profile):
    {"edges": [lo, ..., hi], "counts": [[n per bin] per list]}."""
    top = max((max(p) for p in peak_lists if p), default=0)
    width = _nice(max(1, -(-top // bins)))
    edges = [width * i for i in range(bins + 1)]
    counts = []
    for peaks in peak_lists:
        row = [0] * bins
        for p in peaks:
            row[min(bins - 1, p // width)] += 1
        counts.append(row)
    return {"edges": edges, "counts": counts}


def _nice(n: int) -> int:
    """The smallest of 1, 2, 2.5, 5 × 10^k at least n: bin edges people read at a glance."""
    scale = 1
    while True:
        for step in (1, 2, 2.5, 5):
            if step * scale >= n:
                return int(step * scale)
        scale *= 10


def top_tools(columns: Sequence[Mapping[str, int]], limit: int = 8) -> list[str]:
    """The tools that take the most sent tokens over all columns (the rest are summed as
    "other" by the page)."""
    total: dict[str, int] = {}
    for by_tool in columns:
        for tool, n in by_tool.items():
            total[tool] = total.get(tool, 0) + n
    return sorted(total, key=lambda t: (-total[t], t))[:limit]
