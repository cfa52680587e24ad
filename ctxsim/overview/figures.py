"""A session's overview figures under one profile and cache rule, and their sums.

`session_figures` replays the session once and reads the replay twice over: the prompt-cache
model and information loss (`ctxsim.insights.report.analyse`, exactly what the session's own
cache & information-loss page shows) and the tokens each tool's results take in what was sent.
`aggregate` sums the figures of many sessions; every derived rate is computed from the sums,
never averaged, so a total equals the sum of the sessions' own figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from ctxsim.analysis.choices import CacheChoice
from ctxsim.insights.report import analyse
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult, replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.pipeline.tokens import TokenCounter, message_tokens
from ctxsim.replays import services as replays
from ctxsim.replays.state import ReplaySettings
from ctxsim.replays.token_counts import save_counts

# Bump when the figures change meaning: stored rows under the old key are then not read.
FIGURES_VERSION = 1

# Summed over sessions as they are.
SUMMED = ("sessions", "calls", "failed", "raw_tokens", "sent_tokens", "cached_tokens", "cost",
          "no_cache_cost", "loss_events", "lost_references", "rereads")
# What the provider billed, once recorded usage is stored with sessions (issue "What the
# provider really billed"); until then the overview shows "—" for them.
RECORDED = ("recorded_input_tokens", "recorded_cost", "recorded_cached_tokens")
UNKNOWN_TOOL = "(unnamed tool)"


def figures_key(settings: ReplaySettings, cache: CacheChoice) -> str:
    """Equal for settings that replay alike under the same cache rule (see `ReplaySettings.key`)."""
    text = json.dumps([FIGURES_VERSION, settings.key, asdict(cache.rule())], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class _Observed:
    """A replay whose calls are also handed to `observe` as `analyse` consumes them, so one
    replay feeds both readings."""

    def __init__(self, rep: Any, observe: Callable[[CallResult], None]) -> None:
        self._rep = rep
        self._observe = observe

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rep, name)

    def calls(self) -> Iterator[CallResult]:
        for call in self._rep.calls():
            self._observe(call)
            yield call


class _CallTally:
    """Raw tokens and peaks of the calls that were sent, and per tool the tokens its results
    took in what was sent, summed over those calls."""

    def __init__(self, messages: Sequence[Message], counter: TokenCounter) -> None:
        self.names = {tc.id: tc.name for m in messages for tc in m.tool_calls}
        self.counter = counter
        self.by_tool: dict[str, int] = {}
        self.raw_tokens = 0
        self.peak_sent = 0
        self.peak_raw = 0
        # The engine shares unchanged messages between calls: count each object once.
        self._tokens: dict[int, tuple[Message, int]] = {}

    def _count(self, m: Message) -> int:
        hit = self._tokens.get(id(m))
        if hit is not None and hit[0] is m:
            return hit[1]
        n = message_tokens(m, self.counter)
        self._tokens[id(m)] = (m, n)
        return n

    def __call__(self, call: CallResult) -> None:
        self.peak_raw = max(self.peak_raw, call.raw_tokens)
        if call.error:
            return
        self.raw_tokens += call.raw_tokens
        self.peak_sent = max(self.peak_sent, call.sent_tokens)
        for m in call.sent:
            if m.role == "tool":
                name = self.names.get(m.tool_call_id) or m.name or UNKNOWN_TOOL
                self.by_tool[name] = self.by_tool.get(name, 0) + self._count(m)


def session_figures(session, settings: ReplaySettings, cache: CacheChoice) -> dict[str, Any]:
    """Replay a stored session under `settings` and return its figures (JSON-ready)."""
    canonical = replays.canonical_session(session, settings.counter, other_counts=True)
    rep = replay(canonical, settings.run_config(), sink=NullSpillSink())
    tally = _CallTally(canonical.messages, rep.counter)
    # What this replay tokenizes is stored for the session, as the session page's replays do:
    # opening the session later (in any process) does not tokenize it again.
    with rep.counter.recording() as fresh:
        insights = analyse(_Observed(rep, tally), cache.rule())  # type: ignore[arg-type]
    save_counts(session, canonical, rep.counter, fresh)
    lost, rereads = len(insights.loss.lost), len(insights.loss.rereads)
    return {
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
    out["cost"] = round(out["cost"], 9)
    out["no_cache_cost"] = round(out["no_cache_cost"], 9)
    out["by_tool"] = by_tool
    out["peaks"] = peaks
    out["hit_rate"] = out["cached_tokens"] / out["sent_tokens"] if out["sent_tokens"] else 0.0
    out["saved_tokens"] = out["raw_tokens"] - out["sent_tokens"]
    out["saved_share"] = out["saved_tokens"] / out["raw_tokens"] if out["raw_tokens"] else 0.0
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
