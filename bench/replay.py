"""Replay targets (SPEC §9, issue 21): `python -m bench.replay CALLS[,CALLS...] REPS [--floor]
[--physical] [--profile NAME]`.

Replays each generated CALLS-call session with the `chatcli` profile (or `--profile`) and the
`cl100k_base` counter, every call, token counts included, REPS times. Each repetition replays
every size twice with one fresh counter: first from a cold token cache (`replay`, the wall
time), then again with every count known (`warm`: the memoized engine alone, always CPU time
of this process: with every count known nothing goes to the counting workers, so this
process's CPU is all its work, and the CPU time is not inflated by what other work shares the
machine's cores, as wall time is; issue 21's `linearity-warm` compares two of them). The counting
workers (`ctxsim.pipeline.token_pool`) are started and the BPE table loaded before any timing,
as a web worker has them after its first replay.

With `--floor`, also measures the floor of the first session: one untimed replay collects every
distinct content the replay counts (the transcript's inputs and every message sent at any call,
with the previews, summaries and placeholders the stages made: contents, tool-call names and
arguments, tool-call ids), then a fresh counter (empty cache, same encoding) tokenizes each once,
serially (`floor`). The `replay` target is cold replay / floor.

With `--physical` (run with CTXSIM_TOKEN_PROCESSES=1: one process does all the work), every
figure is CPU time of this process (`time.process_time`), per repetition and side by side:
- `raw_floor`: serial tiktoken (`encode_ordinary`) over the distinct raw contents of the first
  session (its messages' contents, tool-call names and arguments, tool-call ids), nothing else,
  run just before the cold replay and again just after the warm one: a repetition's floor is
  the mean of the two;
- `cold` and `warm` replays as above.
- `unmemoized`: the first session's warm replay again with the stages' memos off
  (`Replay(use_memos=False)`: every stage redoes at every call what its memo would skip).
`replay-physical` is (cold - warm) / raw_floor: the token-counting work a cold replay does
(everything the warm replay does not) against tokenizing the transcript once; it is above 1 by
what the previews and stubs cost and by the counter's own bookkeeping. It is taken per
repetition, against the floor measured around that repetition's replays, and the median of
those ratios is the result (`physical`): on a machine whose speed drifts (the same floor took
6.5 s of CPU in one repetition and 10.5 s in the next, stop 44), a ratio of medians taken
tens of seconds apart measured the drift. `memo` (SPEC §9: memos off / on, warm) is
unmemoized / warm.

Within a repetition the floor and every size run one after the other, so all of them see the
same machine state (the linearity ratios compare two sizes measured side by side).
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from dataclasses import replace

from bench.common import emit, median, note, timed
from ctxsim.generator import generate_session
from ctxsim.pipeline import token_pool, tokens
from ctxsim.pipeline.calibration import calibrate
from ctxsim.pipeline.replay import Replay, replay

PROFILE = "chatcli"
COUNTER = "cl100k_base"


def counted_parts(message, into: set[bytes]) -> None:
    """What the token formula measures of one message (SPEC §5)."""
    into.add(message.content)
    for call in message.tool_calls:
        into.add(call.name.encode("utf-8", "surrogatepass"))
        into.add(call.arguments.encode("utf-8", "surrogatepass"))
    if message.role == "tool" and message.tool_call_id:
        into.add(message.tool_call_id.encode("utf-8", "surrogatepass"))


def _replay_once(messages, profile: str, use_memos: bool = True) -> dict:
    calls = 0
    sent = 0
    config = replay(messages, profile, {"counter": COUNTER}).config
    for call in Replay(messages, config, use_memos=use_memos).calls():
        calls += 1
        sent += call.sent_tokens
    return {"calls": calls, "sent_tokens": sent}


def run_replay(messages, profile: str = PROFILE, clock=time.perf_counter,
               unmemoized: bool = False, after_warm: Callable[[], object] | None = None
               ) -> dict:
    """One full replay from a cold token cache (every call, raw and sent token counts), then
    the same replay again with that counter (every count known), and with `unmemoized` once
    more with the stages' memos off: the cold one timed by `clock`, the others by CPU time.
    `after_warm` runs between the warm replay and the unmemoized one (untimed here)."""
    timings = {}
    with tokens.isolated_counters():  # a fresh shared counter: empty content cache
        start = clock()
        outcome = _replay_once(messages, profile)
        timings["cold"] = clock() - start
        gc.collect()
        start = time.process_time()
        again = _replay_once(messages, profile)
        timings["warm"] = time.process_time() - start
        if after_warm is not None:
            after_warm()
        if unmemoized:
            gc.collect()
            start = time.process_time()
            off = _replay_once(messages, profile, use_memos=False)
            timings["unmemoized"] = time.process_time() - start
            if off != outcome:
                raise SystemExit("a replay without memos counted differently")
    if again != outcome:
        raise SystemExit("a warm replay counted differently from the cold one")
    return {**outcome, **timings}


def raw_contents(messages) -> list[bytes]:
    """The distinct contents the token formula measures in the transcript itself."""
    found: set[bytes] = set()
    for m in messages:
        counted_parts(m, found)
    found.discard(b"")
    return sorted(found)


def distinct_contents(messages, profile: str = PROFILE) -> list[bytes]:
    found: set[bytes] = set()
    seen_ids: set[int] = set()
    keep = []  # keeps visited messages alive so their ids stay unique
    for m in messages:
        counted_parts(m, found)
    for call in replay(messages, profile, {"counter": COUNTER}).calls():
        for m in call.sent:
            if id(m) not in seen_ids:
                seen_ids.add(id(m))
                keep.append(m)
                counted_parts(m, found)
    found.discard(b"")
    return sorted(found)


def run_floor(contents: list[bytes]) -> int:
    counter = tokens.TiktokenCounter(COUNTER)  # same encoding, empty cache
    count = counter.count
    return sum(count(c) for c in contents)


def run_raw_floor(contents: list[bytes]) -> int:
    """Plain serial tiktoken over each content once (no cache, no pieces, no chunks)."""
    encode = tokens.get_encoding(COUNTER).encode_ordinary
    return sum(len(encode(c.decode("utf-8", "replace"))) for c in contents)


def with_recorded_usage(messages):
    """The messages with a recorded usage on every assistant message (a growing context)."""
    out = []
    for index, m in enumerate(messages):
        if m.role == "assistant":
            total = 12_000 + 40 * index
            m = replace(m, meta={**m.meta, "recorded": {
                "total_input": total, "input": 4, "cache_read": total - 4, "cache_write": 0,
                "output": 50, "reasoning": None}})
        out.append(m)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", help="comma-separated session sizes, e.g. 2000,4000")
    parser.add_argument("reps", type=int)
    parser.add_argument("--floor", action="store_true", help="measure the first size's floor")
    parser.add_argument("--physical", action="store_true",
                        help="CPU times, and the floor of the raw contents alone")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", default=PROFILE, help="built-in profile to replay with")
    args = parser.parse_args()
    sizes = [int(n) for n in args.calls.split(",")]
    clock = time.process_time if args.physical else time.perf_counter

    sessions, facts = {}, {}
    for n in sizes:
        gen_time, session = timed(lambda n=n: generate_session(n, args.seed))
        messages = sessions[n] = session.messages
        facts[n] = {"calls": n, "messages": len(messages),
                    "tool_results": sum(1 for m in messages if m.role == "tool"),
                    "bytes": sum(len(m.content) for m in messages)}
        note(f"generated {n} calls: {len(messages)} messages, "
             f"{facts[n]['tool_results']} tool results, "
             f"{facts[n]['bytes'] / 1e6:.1f} MB in {gen_time:.1f}s")
    tokens.get_encoding(COUNTER)  # the BPE table is loaded once per process, outside timings
    token_pool.warm_up(COUNTER)  # as are the counting workers (none with the env var at 1)

    contents: list[bytes] = []
    if args.floor:
        collect_time, contents = timed(lambda: distinct_contents(sessions[sizes[0]], args.profile))
        note(f"collected {len(contents)} distinct contents "
             f"({sum(map(len, contents)) / 1e6:.1f} MB) in {collect_time:.1f}s")
    raw = raw_contents(sessions[sizes[0]]) if args.physical else []
    cold_times: dict[int, list[float]] = {n: [] for n in sizes}
    warm_times: dict[int, list[float]] = {n: [] for n in sizes}
    unmemoized_times: list[float] = []
    floor_times: list[float] = []
    raw_times: list[float] = []
    outcome: dict[int, dict] = {}
    physical_ratios: list[float] = []
    floor_tokens = raw_tokens = 0

    def time_raw_floor() -> int:
        gc.collect()
        start = clock()
        counted = run_raw_floor(raw)
        raw_times.append(clock() - start)
        return counted

    for rep in range(args.reps):
        if args.floor:
            gc.collect()
            start = clock()
            floor_tokens = run_floor(contents)
            floor_times.append(clock() - start)
        if args.physical:
            raw_tokens = time_raw_floor()
        for n in sizes:
            gc.collect()
            first_physical = args.physical and n == sizes[0]
            outcome[n] = run_replay(sessions[n], args.profile, clock, unmemoized=first_physical,
                                    after_warm=time_raw_floor if first_physical else None)
            cold_times[n].append(outcome[n].pop("cold"))
            warm_times[n].append(outcome[n].pop("warm"))
            if "unmemoized" in outcome[n]:
                unmemoized_times.append(outcome[n].pop("unmemoized"))
            if first_physical:
                # The floor of this repetition: the mean of the two runs around its replays.
                raw_times[-2:] = [(raw_times[-2] + raw_times[-1]) / 2]
                physical_ratios.append((cold_times[n][-1] - warm_times[n][-1]) / raw_times[-1])
        note(f"rep {rep + 1}/{args.reps}: "
             + ", ".join(f"{n} calls {cold_times[n][-1]:.2f}s (warm {warm_times[n][-1]:.2f}s)"
                         for n in sizes)
             + (f", floor {floor_times[-1]:.2f}s" if args.floor else "")
             + (f", raw floor {raw_times[-1]:.2f}s, memos off {unmemoized_times[-1]:.2f}s"
                if args.physical else ""))
    # SPEC §11's calibration runs once per session beside the replay; its share of the replay
    # is printed for information (issue 15: at most 5 %). The generated session records no
    # usage, so every call is given some: the fit then sees all 2,000 calls.
    # (Beside a replay means with the counts the replay made: the floor's collecting replay
    # left them in the shared counter; `--physical` has none, so it skips this note.)
    first = sizes[0]
    if args.floor:
        billed = with_recorded_usage(sessions[first])
        calibration_time, _ = timed(lambda: calibrate(billed, COUNTER))
        note(f"calibration of the {first}-call session: {calibration_time:.3f}s, "
             f"{calibration_time / median(cold_times[first]):.1%} of its replay")
    emit({
        "clock": "cpu" if args.physical else "wall",
        "processes": token_pool.processes(),
        "sizes": [{
            **facts[n], "replay_times": cold_times[n], "replay": median(cold_times[n]),
            "warm_times": warm_times[n], "warm": median(warm_times[n]), **outcome[n],
        } for n in sizes],
        "floor_times": floor_times, "floor": median(floor_times) if floor_times else None,
        "distinct_contents": len(contents), "distinct_bytes": sum(map(len, contents)),
        "floor_tokens": floor_tokens,
        "raw_floor_times": raw_times, "raw_floor": median(raw_times) if raw_times else None,
        "raw_contents": len(raw), "raw_bytes": sum(map(len, raw)), "raw_tokens": raw_tokens,
        "physical_ratios": physical_ratios,
        "physical": median(physical_ratios) if physical_ratios else None,
        "unmemoized_times": unmemoized_times,
        "unmemoized": median(unmemoized_times) if unmemoized_times else None,
    })


if __name__ == "__main__":
    main()
