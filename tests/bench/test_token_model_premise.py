"""`make bench`'s token-model target times the same replay with the model on and off; it
stops when the two decide differently (a crash of the whole bench, as a report key naming the
unit once caused). The premise, on a small session: billed as the counter counts, the model
changes no decision, only the keys that name the unit."""

from __future__ import annotations

from bench.replay import COUNTER
from bench.token_model import PROFILE, billed, decided
from ctxsim.generator import generate_session
from ctxsim.pipeline import token_model
from ctxsim.pipeline.replay import Replay, replay


def test_billed_as_the_counter_counts_the_model_changes_no_decision():
    messages = billed(list(generate_session(120, seed=1).messages))
    config = replay(messages, PROFILE, {"counter": COUNTER}).config
    on = [[r.report for r in c.stages] for c in Replay(messages, config).calls()]
    off = [[r.report for r in c.stages]
           for c in Replay(messages, config, use_token_model=False).calls()]
    assert any("tokens_after_compared" in r for c in on for r in c) or any(
        r.get("token_unit") == "provider" for c in on for r in c)
    assert decided(on) == decided(off)
    assert {"token_unit", "tokens_after_compared"} <= token_model.UNIT_KEYS
