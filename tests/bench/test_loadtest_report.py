"""The load test's verdict: errors and any 10-second window whose p95 is above 1 s fail it."""

from __future__ import annotations

from loadtest.run import Sample, report, windows


def _samples(times_by_window: dict[int, list[float]]) -> list[Sample]:
    out = []
    for start, times in times_by_window.items():
        for n, seconds in enumerate(times):
            out.append(Sample("open", seconds, 200, sent_at=start + n * 0.01))
    return out


def test_it_passes_when_every_window_keeps_its_p95_under_a_second(capsys):
    samples = _samples({0: [0.2] * 40, 10: [0.4] * 40})
    assert report(samples, comments=True) == 0
    assert "windows with p95 above 1000 ms: 0" in capsys.readouterr().out


def test_it_fails_when_one_window_is_slow_though_the_run_overall_is_fast(capsys):
    # 200 fast requests, then a cold window: the overall p95 stays low, that window's does not.
    samples = _samples({0: [3.0] * 20, 10: [0.1] * 200})
    assert report(samples, comments=True) == 1
    out = capsys.readouterr().out
    assert "windows with p95 above 1000 ms: 1 (starting at 0s)" in out


def test_windows_are_ten_seconds_by_the_time_a_request_was_sent():
    found = windows(_samples({0: [0.1, 0.2], 20: [0.5]}))
    assert [(w[0], w[1]) for w in found] == [(0, 2), (20, 1)]
