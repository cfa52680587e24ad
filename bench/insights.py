"""Insights targets (issue 21): `python -m bench.insights CALLS[,CALLS...] REPS
[--profiles a,b]`.

For each generated CALLS-call session, times the cache & information-loss analysis
(`ctxsim.insights.report.analyse`: the replay plus the cache simulation, break explanation and
loss tracking) of each profile against the warm replays it needs (the same replays, token
counts already cached, nothing else), REPS times, side by side within a repetition. Profiles
`none`, `chatcli` and `aivax` by default: the page's three default columns (`aivax` was left
out until its replay grew linearly with the session, issue 31).
"""

from __future__ import annotations

import argparse
import gc
import resource

from bench.common import emit, median, note, timed
from ctxsim.generator import generate_session
from ctxsim.insights.prices import cache_rule
from ctxsim.insights.report import analyse
from ctxsim.pipeline.replay import replay

PROFILES = ("none", "chatcli", "aivax")
COUNTER = "cl100k_base"


def run_replays(messages, profiles) -> int:
    calls = 0
    for profile in profiles:
        for _ in replay(messages, profile, {"counter": COUNTER}).calls():
            calls += 1
    return calls


def run_insights(messages, profiles, rule) -> dict:
    out = {"lost": 0, "rereads": 0, "breaks": 0}
    for profile in profiles:
        insights = analyse(replay(messages, profile, {"counter": COUNTER}), rule)
        out["lost"] += len(insights.loss.lost)
        out["rereads"] += len(insights.loss.rereads)
        out["breaks"] += len(insights.breaks)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", help="comma-separated session sizes, e.g. 2000,4000")
    parser.add_argument("reps", type=int)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profiles", default=",".join(PROFILES))
    args = parser.parse_args()
    sizes = [int(n) for n in args.calls.split(",")]
    profiles = args.profiles.split(",")
    rule = cache_rule()
    sessions = {}
    for n in sizes:
        gen_time, session = timed(lambda n=n: generate_session(n, args.seed))
        sessions[n] = session.messages
        note(f"generated {n} calls: {len(session.messages)} messages in {gen_time:.1f}s")
    for n in sizes:  # warm: every content the replays count is counted once, untimed
        run_replays(sessions[n], profiles)
    replay_times: dict[int, list[float]] = {n: [] for n in sizes}
    insight_times: dict[int, list[float]] = {n: [] for n in sizes}
    found: dict[int, dict] = {}
    for rep in range(args.reps):
        for n in sizes:
            gc.collect()
            seconds, _ = timed(lambda n=n: run_replays(sessions[n], profiles))
            replay_times[n].append(seconds)
            gc.collect()
            seconds, found[n] = timed(lambda n=n: run_insights(sessions[n], profiles, rule))
            insight_times[n].append(seconds)
        note(f"rep {rep + 1}/{args.reps}: " + ", ".join(
            f"{n} calls replays {replay_times[n][-1]:.2f}s insights "
            f"{insight_times[n][-1]:.2f}s" for n in sizes))
    emit({
        "profiles": profiles, "rule": f"{rule.model} {rule.lifetime}",
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "sizes": [{"calls": n, "replay_times": replay_times[n], "replay": median(replay_times[n]),
                   "insights_times": insight_times[n], "insights": median(insight_times[n]),
                   **found[n]} for n in sizes],
    })


if __name__ == "__main__":
    main()
