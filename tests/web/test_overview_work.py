"""Issue 31: the overview's per-call tally looks at what changed at a call, not at everything
it sent. Counted, not timed: the messages whose role the tally reads, over two session
lengths (a tally that walks every prompt reads about four times as many for twice the calls).
"""

from __future__ import annotations

import pytest

from ctxsim.generator import generate_session
from ctxsim.overview.figures import UNKNOWN_TOOL, _CallTally
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.tokens import get_counter, message_tokens

SIZES = (150, 300)


class _Counted(Message):
    """A message that counts the reads of its role."""

    __slots__ = ()
    reads = [0]

    def __getattribute__(self, name: str):
        if name == "role":
            _Counted.reads[0] += 1
        return super().__getattribute__(name)


def _tally(n: int, profile: str) -> tuple[_CallTally, list, int]:
    messages = [_Counted(**{f: getattr(m, f) for f in Message.__dataclass_fields__})
                for m in generate_session(n, seed=4).messages]
    calls = list(replay(messages, profile, {"counter": "bytes4"}).calls())
    tally = _CallTally(messages, get_counter("bytes4"), "bytes4")
    _Counted.reads[0] = 0
    for call in calls:
        tally(call)
    return tally, calls, _Counted.reads[0]


@pytest.mark.parametrize("profile", ["chatcli", "none", "claude-code"])
def test_the_tally_reads_what_changed_and_sums_what_every_call_sent(profile):
    results = {n: _tally(n, profile) for n in SIZES}
    (_, _, small), (tally, calls, large) = results[SIZES[0]], results[SIZES[1]]
    assert large / small <= 2.4, (small, large)
    names = {tc.id: tc.name for call in calls[-1:] for m in call.raw_history
             for tc in m.tool_calls}
    expected: dict[str, int] = {}
    for call in calls:  # the old walk over every prompt, as the oracle
        if call.error:
            continue
        for m in call.sent:
            if m.role == "tool":
                name = names.get(m.tool_call_id) or m.name or UNKNOWN_TOOL
                expected[name] = expected.get(name, 0) + message_tokens(m, get_counter("bytes4"))
    assert tally.by_tool == expected and expected
