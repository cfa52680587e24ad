"""Prompt-cache prices and rules (SPEC §10), as plain data with the date they were taken.

Edit the table here when providers change their prices; nothing is fetched from the network.
Prices are US dollars per million *input* tokens: output tokens are not part of context
management, so they are never priced.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PRICES_TAKEN = "2026-11"

ANTHROPIC = "anthropic"
OPENAI = "openai"

# Lifetimes a page may choose, in seconds, per provider style. Anthropic sells two lifetimes
# (the 1-hour one at a higher write price); OpenAI evicts idle prefixes after 5-10 minutes.
LIFETIMES: dict[str, dict[str, int]] = {
    ANTHROPIC: {"5m": 300, "1h": 3600},
    OPENAI: {"5m": 300, "10m": 600},
}
ANTHROPIC_WRITE = {"5m": 1.25, "1h": 2.0}
OPENAI_STEP = 128  # cached prefixes grow in 128-token steps beyond the minimum


@dataclass(frozen=True)
class ModelPrice:
    """One provider model: its input price and how its prompt cache behaves."""

    key: str
    label: str
    provider: str  # anthropic | openai
    input_per_mtok: float
    min_cached_tokens: int
    read_multiplier: float  # a cached input token costs this share of the input price


MODELS: dict[str, ModelPrice] = {
    m.key: m
    for m in (
        ModelPrice("claude-sonnet-4.5", "Claude Sonnet 4.5", ANTHROPIC, 3.0, 1024, 0.1),
        ModelPrice("claude-haiku-4.5", "Claude Haiku 4.5", ANTHROPIC, 1.0, 4096, 0.1),
        ModelPrice("claude-opus-4.1", "Claude Opus 4.1", ANTHROPIC, 15.0, 1024, 0.1),
        ModelPrice("gpt-5", "GPT-5", OPENAI, 1.25, 1024, 0.1),
        ModelPrice("gpt-5-mini", "GPT-5 mini", OPENAI, 0.25, 1024, 0.1),
        ModelPrice("gpt-4o", "GPT-4o", OPENAI, 2.50, 1024, 0.5),
    )
}
DEFAULT_MODEL = "claude-sonnet-4.5"


@dataclass(frozen=True)
class CacheRule:
    """Everything the cache simulation needs for one provider model and lifetime."""

    model: str
    style: str  # anthropic: explicit breakpoint at the end; openai: automatic prefixes
    price_per_mtok: float
    min_tokens: int
    ttl_seconds: int
    lifetime: str
    write_multiplier: float
    read_multiplier: float
    step: int = 0  # openai: cached length = min + k * step

    def dollars(self, tokens: float) -> float:
        return tokens * self.price_per_mtok / 1_000_000

    def cacheable(self, tokens: int) -> int:
        """How many tokens of a cached prefix of this length a later call can read."""
        if tokens < self.min_tokens:
            return 0
        if not self.step:
            return tokens
        return self.min_tokens + (tokens - self.min_tokens) // self.step * self.step


class PriceError(ValueError):
    pass


def cache_rule(model: str = DEFAULT_MODEL, lifetime: str | None = None,
               price_per_mtok: float | None = None) -> CacheRule:
    """The rule for a model of the table; `price_per_mtok` overrides its listed price."""
    try:
        m = MODELS[model]
    except KeyError:
        raise PriceError(f"unknown model {model!r} (known: {', '.join(MODELS)})") from None
    lifetimes = LIFETIMES[m.provider]
    lifetime = lifetime or next(iter(lifetimes))
    if lifetime not in lifetimes:
        raise PriceError(f"{m.label} caches for {' or '.join(lifetimes)}, not {lifetime!r}")
    if price_per_mtok is not None and price_per_mtok < 0:
        raise PriceError("the price cannot be negative")
    rule = CacheRule(
        model=m.key,
        style=m.provider,
        price_per_mtok=m.input_per_mtok,
        min_tokens=m.min_cached_tokens,
        ttl_seconds=lifetimes[lifetime],
        lifetime=lifetime,
        write_multiplier=ANTHROPIC_WRITE[lifetime] if m.provider == ANTHROPIC else 1.0,
        read_multiplier=m.read_multiplier,
        step=OPENAI_STEP if m.provider == OPENAI else 0,
    )
    return rule if price_per_mtok is None else replace(rule, price_per_mtok=price_per_mtok)
