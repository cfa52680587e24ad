"""SPEC §11: recorded cache reads and writes priced beside the simulated cache."""

from __future__ import annotations

import pytest

from ctxsim.insights.cache import CallCache
from ctxsim.insights.prices import cache_rule
from ctxsim.insights.recorded import compare, recorded_call


def _usage(total: int, read: int, write: int | None) -> dict:
    return {"total_input": total, "input": total - read - (write or 0), "cache_read": read,
            "cache_write": write, "output": 10, "reasoning": None}


def test_a_recorded_call_is_priced_by_reads_writes_and_the_rest():
    rule = cache_rule("claude-sonnet-4.5")  # $3/Mtok, reads 0.1×, 5-minute writes 1.25×
    call = recorded_call(3, _usage(10_000, 8_000, 1_500), rule)
    assert (call.cached, call.written, call.uncached) == (8_000, 1_500, 2_000)
    # 8,000 × 0.1 + 1,500 × 1.25 + 500 = 3,175 input-price tokens
    assert call.cost == pytest.approx(3_175 * 3 / 1e6)
    assert call.no_cache_cost == pytest.approx(10_000 * 3 / 1e6)


def test_openai_usage_has_no_writes_and_reads_at_its_multiplier():
    rule = cache_rule("gpt-4o")  # $2.50/Mtok, reads 0.5×
    call = recorded_call(0, _usage(4_000, 3_072, None), rule)
    assert call.written == 0
    assert call.cost == pytest.approx((3_072 * 0.5 + 928) * 2.5 / 1e6)


def test_the_comparison_sums_the_calls_with_usage_and_explains_the_difference():
    rule = cache_rule("claude-sonnet-4.5")
    recorded = [_usage(20_000, 0, 20_000), _usage(21_000, 20_000, 1_000), None]
    simulated = [CallCache(5_000, 0, 5_000, 5_000, 0.02, 0.015, 0),
                 CallCache(6_000, 5_000, 1_000, 1_000, 0.005, 0.018, 0),
                 CallCache(7_000, 6_000, 1_000, 1_000, 0.005, 0.021, 0)]
    c = compare(recorded, simulated, rule, calibration_a=15_000.0, calibration_b=1.2)
    assert [call.call_index for call in c.calls] == [0, 1]
    assert (c.input_tokens, c.cached, c.written) == (41_000, 20_000, 21_000)
    assert (c.simulated_input, c.simulated_cached) == (11_000, 5_000)
    assert c.cache_read_share == pytest.approx(20_000 / 41_000)
    assert "30,000 input tokens more" in c.explanation[0]
    assert "15,000 tokens per call" in c.explanation[0] and "1.20×" in c.explanation[0]
    assert "49%" in c.explanation[1] and "45%" in c.explanation[1]


def test_no_recorded_usage_means_no_comparison():
    rule = cache_rule("gpt-5")
    assert compare([None, None], [CallCache(1, 0, 0, 1, 0, 0, 0)] * 2, rule) is None
