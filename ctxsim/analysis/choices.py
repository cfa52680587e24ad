"""The provider model, cache lifetime and price chosen on the insights and sweep pages.

Its own module because both the page (`services`) and the worker (`tasks`) read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ctxsim.insights.prices import (
    DEFAULT_MODEL,
    LIFETIMES,
    MODELS,
    CacheRule,
    PriceError,
    cache_rule,
)


@dataclass
class CacheChoice:
    model: str = DEFAULT_MODEL
    lifetime: str = ""
    price: float | None = None

    def rule(self) -> CacheRule:
        return cache_rule(self.model, self.lifetime or None, self.price)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "lifetime": self.lifetime, "price": self.price}

    def query(self) -> list[tuple[str, str]]:
        out = [("model", self.model), ("lifetime", self.lifetime)]
        return out + ([("price", f"{self.price:g}")] if self.price is not None else [])


def cache_choice(query: Mapping[str, Any]) -> tuple[CacheChoice, dict[str, str]]:
    """The page's cache settings; bad values fall back to the table's, with a message."""
    errors: dict[str, str] = {}
    model = query.get("model") or DEFAULT_MODEL
    if model not in MODELS:
        errors["model"] = f"unknown model {model!r}"
        model = DEFAULT_MODEL
    lifetimes = LIFETIMES[MODELS[model].provider]
    lifetime = query.get("lifetime") or next(iter(lifetimes))
    if lifetime not in lifetimes:
        errors["lifetime"] = f"{MODELS[model].label} caches for {' or '.join(lifetimes)}"
        lifetime = next(iter(lifetimes))
    price = None
    text = (query.get("price") or "").strip()
    if text:
        try:
            price = float(text)
            if not price >= 0 or price > 1000:  # also rejects NaN
                raise ValueError
        except ValueError:
            errors["price"] = f"{text!r} is not a price in dollars per million tokens"
            price = None
    choice = CacheChoice(model, lifetime, price)
    try:
        choice.rule()
    except PriceError as exc:  # pragma: no cover - every field was checked above
        errors["model"] = str(exc)
        choice = CacheChoice()
    return choice, errors


def all_lifetimes() -> list[str]:
    return list(dict.fromkeys(name for options in LIFETIMES.values() for name in options))


def model_options() -> list[dict[str, Any]]:
    return [{"key": m.key, "label": m.label, "price": m.input_per_mtok, "provider": m.provider,
             "lifetimes": list(LIFETIMES[m.provider])} for m in MODELS.values()]


def price_text(cache: Mapping[str, Any]) -> str:
    """A stored choice's price as the page's query would carry it ("" for none)."""
    price = cache.get("price")
    return "" if price is None else f"{price}"
