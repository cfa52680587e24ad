"""Token-model target (SPEC §11, issue 25): `python -m bench.token_model CALLS REPS`.

Replays the generated CALLS-call Claude Code session, with a recorded usage on every call,
under the `claude-code` profile from a cold token cache
(a fresh shared counter each time), with the token model on (`anchored`, the default: the
model is built and every limit compared in the provider's tokens) and off
(`Replay(use_token_model=False)`: ctxsim's own count), alternately, REPS times each; wall
time. `token-model` is on / off: <= 1.1.

The recorded usage is the counter's own estimate of each call's raw prompt (a provider whose
tokenizer is the counter): the model then fits b = 1, c = 0 and every stage decides exactly as
with the model off, so the ratio is the model's own cost (building it, one lookup per compared
figure), not a different replay.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace as with_fields

from bench.common import emit, median
from bench.replay import COUNTER
from ctxsim.generator import generate_session
from ctxsim.pipeline import token_model, token_pool, tokens
from ctxsim.pipeline.calibration import call_estimates
from ctxsim.pipeline.replay import Replay, replay

PROFILE = "claude-code"


def billed(messages) -> list:
    """Each assistant message with the usage of a provider that counts like the counter."""
    with tokens.isolated_counters():
        points = iter(call_estimates(messages, tokens.get_counter(COUNTER)))
        out = []
        for m in messages:
            if m.role == "assistant":
                total = next(points).estimate
                m = with_fields(m, meta={**m.meta, "recorded": {
                    "total_input": total, "input": 4, "cache_read": total - 4,
                    "cache_write": 0, "output": 50, "reasoning": None}})
            out.append(m)
    return out


def once(messages, on: bool) -> float:
    config = replay(messages, PROFILE, {"counter": COUNTER}).config
    with tokens.isolated_counters():
        start = time.perf_counter()
        for _ in Replay(messages, config, use_token_model=on).calls():
            pass
        return time.perf_counter() - start


def decided(calls: list[list[dict]]) -> list[list[dict]]:
    """The stages' reports without the keys that only name the unit they compared in."""
    return [[{k: v for k, v in r.items() if k not in token_model.UNIT_KEYS} for r in c]
            for c in calls]


def main() -> None:
    calls, reps = int(sys.argv[1]), int(sys.argv[2])
    messages = billed(list(generate_session(calls, seed=1).messages))
    token_pool.warm_up(COUNTER)  # the counting workers, as in bench.replay
    on, off = [], []
    for _ in range(reps):
        off.append(once(messages, False))
        on.append(once(messages, True))
    same = [[r.report for r in c.stages] for c in
            Replay(messages, replay(messages, PROFILE, {"counter": COUNTER}).config).calls()]
    plain = [[r.report for r in c.stages] for c in Replay(
        messages, replay(messages, PROFILE, {"counter": COUNTER}).config,
        use_token_model=False).calls()]
    if decided(same) != decided(plain):
        raise SystemExit("the token model changed what the stages decided")
    emit({"calls": calls, "on": median(on), "off": median(off), "on_times": on,
          "off_times": off})


if __name__ == "__main__":
    main()
