"""Issue 20 ("Holds under hostile use"): the sweep's bounds hold before any work is done."""

from __future__ import annotations

import tracemalloc

import pytest

from ctxsim.insights.sweep import MAX_VALUES, SweepError, axis


def test_a_huge_sweep_range_is_refused_before_it_is_built():
    """issue 20 item 3: `stop1=20000000` allocated the whole range before the 25-value check."""
    tracemalloc.start()
    try:
        with pytest.raises(SweepError, match=r"2000001 values; at most 25"):
            axis("x", 0, 2_000_000, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_a_range_too_long_for_a_python_sequence_is_a_sweep_error():
    """issue 20 item 3: a range beyond sys.maxsize values is one clear error too."""
    with pytest.raises(SweepError, match="at most 25"):
        axis("x", 0, 10**30, 1)
    assert len(axis("x", 0, 48, 2).values) == MAX_VALUES
    assert axis("x", 7, 7, 10**30).values == (7,)
