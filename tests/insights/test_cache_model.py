"""The prompt-cache model against figures computed by hand (SPEC §10)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxsim.insights.cache import CacheSimulator, break_even
from ctxsim.insights.prices import MODELS, PRICES_TAKEN, PriceError, cache_rule
from tests.shared import ROOT

SONNET = cache_rule("claude-sonnet-4.5")  # $3/M, minimum 1024, write 1.25x, read 0.1x, 5 min
GPT5 = cache_rule("gpt-5")  # $1.25/M, minimum 1024 then 128-token steps, read 0.1x


def dollars(tokens: float, price: float) -> float:
    return tokens * price / 1_000_000


def test_the_price_table_is_dated_and_matches_the_spec():
    assert PRICES_TAKEN == "2026-11"
    prices = {k: m.input_per_mtok for k, m in MODELS.items()}
    assert prices == {"claude-sonnet-4.5": 3.0, "claude-haiku-4.5": 1.0, "claude-opus-4.1": 15.0,
                      "gpt-5": 1.25, "gpt-5-mini": 0.25, "gpt-4o": 2.5}
    assert MODELS["claude-haiku-4.5"].min_cached_tokens == 4096
    assert MODELS["gpt-4o"].read_multiplier == 0.5
    assert cache_rule("claude-opus-4.1", "1h").write_multiplier == 2.0


def test_a_price_override_and_bad_choices():
    assert cache_rule("gpt-5", price_per_mtok=2.0).price_per_mtok == 2.0
    with pytest.raises(PriceError):
        cache_rule("gpt-9")
    with pytest.raises(PriceError):
        cache_rule("gpt-5", "1h")  # OpenAI does not sell a one-hour lifetime
    with pytest.raises(PriceError):
        cache_rule("gpt-5", price_per_mtok=-1)


def test_anthropic_writes_the_whole_prompt_then_reads_it_as_a_prefix():
    sim = CacheSimulator(SONNET)
    first = sim.step(["sys", "user"], [1000, 500], at=0)
    assert (first.cached, first.written, first.uncached) == (0, 1500, 1500)
    assert first.cost == pytest.approx(dollars(1500 * 1.25, 3))
    assert first.no_cache_cost == pytest.approx(dollars(1500, 3))

    second = sim.step(["sys", "user", "tool"], [1000, 500, 300], at=60)
    assert (second.cached, second.written, second.uncached) == (1500, 300, 300)
    assert second.cost == pytest.approx(dollars(1500 * 0.1 + 300 * 1.25, 3))  # $0.001575


def test_anthropic_reads_only_an_earlier_breakpoint_while_openai_reads_any_common_prefix():
    anthropic, openai = CacheSimulator(SONNET), CacheSimulator(GPT5)
    for sim in (anthropic, openai):
        sim.step(["a", "b", "c"], [1000, 500, 300], at=0)
    changed = (["a", "b", "d"], [1000, 500, 300])
    # The common prefix a+b (1500 tokens) was never a breakpoint of its own.
    assert anthropic.step(*changed, at=10).cached == 0
    hit = openai.step(*changed, at=10)
    assert hit.cached == 1024 + 3 * 128  # 1408: from 1024 in 128-token steps, not past 1500
    assert hit.cost == pytest.approx(dollars(1408 * 0.1 + 392, 1.25))


def test_a_prompt_below_the_minimum_is_neither_written_nor_read():
    haiku = CacheSimulator(cache_rule("claude-haiku-4.5"))  # minimum 4096
    small = haiku.step(["a"], [3000], at=0)
    assert (small.cached, small.written) == (0, 0)
    assert small.cost == pytest.approx(dollars(3000, 1))
    grown = haiku.step(["a", "b"], [3000, 1500], at=1)
    assert (grown.cached, grown.written) == (0, 4500)
    assert haiku.step(["a", "b", "c"], [3000, 1500, 10], at=2).cached == 4500

    openai = CacheSimulator(GPT5)
    openai.step(["a"], [1000], at=0)
    assert openai.step(["a", "b"], [1000, 100], at=1).cached == 0  # 1000 < 1024


def test_entries_expire_after_their_lifetime_from_the_last_use():
    sim = CacheSimulator(SONNET)  # 300 s
    sim.step(["a"], [2000], at=0)
    assert sim.step(["a", "b"], [2000, 10], at=200).cached == 2000  # read refreshes "a"
    # 450 s after "a" was written, but 250 s after it was last read: still alive.
    assert sim.step(["a", "c"], [2000, 10], at=450).cached == 2000
    assert sim.step(["a", "d"], [2000, 10], at=751).cached == 0  # 301 s idle: gone

    hour = CacheSimulator(cache_rule("claude-sonnet-4.5", "1h"))
    hour.step(["a"], [2000], at=0)
    assert hour.step(["a", "b"], [2000, 10], at=3600).cached == 2000
    assert hour.step(["a", "b", "c"], [2000, 10, 10], at=7201).cached == 0


def test_openai_prefixes_expire_when_idle():
    sim = CacheSimulator(cache_rule("gpt-5", "10m"))
    sim.step(["a", "b"], [1100, 100], at=0)
    assert sim.step(["a", "b", "c"], [1100, 100, 50], at=599).cached == 1152
    assert sim.step(["a", "b", "c", "d"], [1100, 100, 50, 5], at=1200).cached == 0


def test_without_timestamps_calls_are_taken_as_close_together():
    sim = CacheSimulator(SONNET)
    sim.step(["a"], [2000], at=1000)
    assert sim.step(["a", "b"], [2000, 5], at=None).cached == 2000
    assert sim.step(["a", "b", "c"], [2000, 5, 5], at=None).cached == 2005


def test_gpt4o_reads_cached_tokens_at_half_price():
    sim = CacheSimulator(cache_rule("gpt-4o"))
    sim.step(["a"], [2048], at=0)
    hit = sim.step(["a", "b"], [2048, 100], at=1)
    assert hit.cached == 2048
    assert hit.cost == pytest.approx(dollars(2048 * 0.5 + 100, 2.5))


def test_break_even_counts_the_calls_the_savings_need_to_pay_for_the_write():
    # 10000 cached tokens rewritten to 6000: written at 1.25x instead of read at 0.1x
    # = 6000 * 1.25 - 10000 * 0.1 = 6500 token-prices; each later call reads 4000 fewer
    # tokens = 400 token-prices; 6500 / 400 = 16.25 -> 17 calls.
    result = break_even(10000, 4000, SONNET, remaining_calls=20)
    assert result.calls == 17 and result.pays_back
    assert result.extra_cost == pytest.approx(dollars(6500, 3))
    assert result.saving_per_call == pytest.approx(dollars(400, 3))
    assert not break_even(10000, 4000, SONNET, remaining_calls=16).pays_back
    # One-hour writes cost 2x: 6000 * 2 - 1000 = 11000; / 400 = 27.5 -> 28.
    assert break_even(10000, 4000, cache_rule("claude-sonnet-4.5", "1h"), 40).calls == 28
    # OpenAI has no write premium: 6000 - 1000 = 5000; / 400 = 12.5 -> 13.
    assert break_even(10000, 4000, GPT5, 40).calls == 13


def test_a_compaction_that_saves_nothing_never_pays_back_and_a_cheap_one_pays_at_once():
    never = break_even(5000, 0, SONNET, remaining_calls=1000)
    assert never.calls is None and not never.pays_back
    growing = break_even(5000, -20, SONNET, remaining_calls=1000)  # a longer placeholder
    assert growing.calls is None
    # Nothing was cached before (rewritten 0): the event costs less than no compaction.
    at_once = break_even(0, 300, SONNET, remaining_calls=0)
    assert at_once.calls == 0 and at_once.pays_back


def test_the_insights_package_imports_without_django():
    code = (
        "import importlib, pkgutil, sys\n"
        "import ctxsim.insights as p\n"
        "for m in pkgutil.walk_packages(p.__path__, 'ctxsim.insights.'):\n"
        "    importlib.import_module(m.name)\n"
        "assert 'ctxsim.insights.sweep' in sys.modules\n"
        "assert 'django' not in sys.modules, sorted(m for m in sys.modules if 'django' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={"PATH": ""})
