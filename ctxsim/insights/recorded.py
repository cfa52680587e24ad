"""What the provider's recorded cache reads and writes cost, beside the simulated ones (§11).

The cache & cost page simulates a prompt cache over ctxsim's own estimates. A transcript that
records usage also says what really happened: how much of each request was read from the
cache and how much was written to it. This prices those recorded figures with the same rule
(price, read and write multipliers) and explains why they differ from the simulation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .prices import CacheRule


@dataclass(frozen=True)
class RecordedCall:
    """One call's recorded input split and its price under a cache rule."""

    call_index: int
    input_tokens: int
    cached: int
    written: int
    uncached: int
    cost: float
    no_cache_cost: float


def recorded_call(call_index: int, recorded: Mapping[str, Any], rule: CacheRule
                  ) -> RecordedCall:
    """Price a recorded usage: cache reads at the read price, cache writes at the write price
    (Anthropic; OpenAI records none), the rest at the input price."""
    total = int(recorded.get("total_input") or 0)
    cached = int(recorded.get("cache_read") or 0)
    written = int(recorded.get("cache_write") or 0)
    uncached = max(0, total - cached)
    fresh = max(0, uncached - written)
    cost = rule.dollars(cached * rule.read_multiplier + written * rule.write_multiplier + fresh)
    return RecordedCall(call_index, total, cached, written, uncached, cost, rule.dollars(total))


@dataclass(frozen=True)
class RecordedComparison:
    calls: list[RecordedCall]
    input_tokens: int
    cached: int
    written: int
    cost: float
    no_cache_cost: float
    simulated_input: int
    simulated_cached: int
    simulated_written: int
    simulated_cost: float
    explanation: list[str]

    @property
    def cache_read_share(self) -> float | None:
        return self.cached / self.input_tokens if self.input_tokens else None

    @property
    def simulated_read_share(self) -> float | None:
        return self.simulated_cached / self.simulated_input if self.simulated_input else None


def compare(recorded: Sequence[Mapping[str, Any] | None], simulated: Sequence[Any],
            rule: CacheRule, calibration_a: float | None = None,
            calibration_b: float | None = None) -> RecordedComparison | None:
    """Recorded against simulated, over the calls that have a recorded usage (the simulated
    calls at the same positions); None when the session records no usage.

    `recorded[i]` and `simulated[i]` are call i (the replay's numbering); a simulated call is
    a `CallCache` or anything with its `input_tokens`, `cached`, `written` and `cost`."""
    pairs = [(i, r, s) for i, (r, s) in enumerate(zip(recorded, simulated, strict=False)) if r]
    if not pairs:
        return None
    calls = [recorded_call(i, r, rule) for i, r, _ in pairs]
    sims = [s for _, _, s in pairs]
    comparison = RecordedComparison(
        calls=calls,
        input_tokens=sum(c.input_tokens for c in calls),
        cached=sum(c.cached for c in calls),
        written=sum(c.written for c in calls),
        cost=sum(c.cost for c in calls),
        no_cache_cost=sum(c.no_cache_cost for c in calls),
        simulated_input=sum(s.input_tokens for s in sims),
        simulated_cached=sum(s.cached for s in sims),
        simulated_written=sum(s.written for s in sims),
        simulated_cost=sum(s.cost for s in sims),
        explanation=[],
    )
    comparison.explanation.extend(_explain(comparison, calibration_a, calibration_b))
    return comparison


def _explain(c: RecordedComparison, a: float | None, b: float | None) -> list[str]:
    """Why the recorded figures differ from the simulated ones, in the page's words."""
    lines = []
    more = c.input_tokens - c.simulated_input
    if more > 0:
        why = "the system prompt and tool definitions the transcript does not show"
        if a is not None and b is not None:
            why += (f" (about {round(a):,} tokens per call) and the provider's tokenizer "
                    f"counting {b:.2f}× ctxsim's estimate")
        lines.append(f"The provider billed {more:,} input tokens more than the simulation "
                     f"counts: {why}.")
    elif more < 0:
        lines.append(f"The provider billed {-more:,} input tokens fewer than the simulation "
                     "counts: its tokenizer counts fewer tokens than ctxsim's estimate.")
    real, sim = c.cache_read_share, c.simulated_read_share
    if real is not None and sim is not None:
        lines.append(
            f"The provider read {real:.0%} of the input from its cache; the simulation reads "
            f"{sim:.0%}. The real agent places its own cache breakpoints (on the system "
            "prompt and tools too), and its cache entries expire on the provider's clock, "
            "so the two differ even for the same history."
        )
    if c.written and not c.simulated_written:
        lines.append("The provider recorded cache writes the simulation does not make "
                     "(this model's rule writes no premium, or the prompts were below its "
                     "minimum).")
    return lines
