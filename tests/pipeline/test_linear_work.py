"""Issue 21: a replay's work at one call follows what changed at it, not the history's length.

Counted, not timed: the history storage each call creates (a tuple is a copy of every message
it holds, a `History` shares the chunks it did not touch) and how often a message's role is
read (a stage or the engine scanning the whole history at every call reads it for every
message). Both grow about twice for a session twice as long when the work is linear, and four
times when it is quadratic."""

from __future__ import annotations

import pytest

from ctxsim.generator import generate_session
from ctxsim.pipeline.history import CHUNK, History, Prefix
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import replay

PROFILES = ["chatcli", "claude-code"]
SIZES = (150, 300)
LINEAR = 2.35  # quadratic work makes the ratio of the two sizes about 3 or more here


def _storage(history) -> list:
    if isinstance(history, History):
        return list(history.storage())
    if isinstance(history, Prefix):
        return []  # a window on the replay's own growing list
    return [history]


def copied_per_replay(messages, profile: str) -> int:
    """Message references in the storage created anew by each call, summed over the calls."""
    seen: dict[int, object] = {}  # id -> object, kept alive so ids stay unique
    total = 0
    for call in replay(messages, profile, {"counter": "bytes4"}).calls():
        histories = [call.raw_history, call.input_history, call.persistent, call.sent,
                     *(s.history for s in call.stages)]
        for h in histories:
            for part in _storage(h):
                if id(part) not in seen:
                    seen[id(part)] = part
                    total += len(part)
    return total


class _Counted(Message):
    """A message that counts the reads of its role."""

    __slots__ = ()
    reads = [0]

    def __getattribute__(self, name: str):
        if name == "role":
            _Counted.reads[0] += 1
        return super().__getattribute__(name)


def role_reads_per_replay(messages, profile: str) -> int:
    counted = [_Counted(**{f: getattr(m, f) for f in Message.__dataclass_fields__})
               for m in messages]
    _Counted.reads[0] = 0
    for _ in replay(counted, profile, {"counter": "bytes4"}).calls():
        pass
    return _Counted.reads[0]


@pytest.fixture(scope="module")
def sessions():
    return {n: generate_session(n, seed=1).messages for n in SIZES}


@pytest.mark.parametrize("profile", PROFILES)
def test_a_call_copies_what_changed_not_the_whole_history(sessions, profile) -> None:
    small, large = (copied_per_replay(sessions[n], profile) for n in SIZES)
    assert large / small <= LINEAR, (small, large)
    # And in absolute terms: a few chunks per call, not one history (about 3.6 messages a
    # call) per call.
    assert large <= SIZES[1] * 6 * CHUNK


@pytest.mark.parametrize("profile", PROFILES)
def test_a_call_reads_the_new_and_changed_messages_not_the_whole_history(sessions,
                                                                        profile) -> None:
    small, large = (role_reads_per_replay(sessions[n], profile) for n in SIZES)
    assert large / small <= LINEAR, (small, large)


def test_the_counters_see_quadratic_work(sessions) -> None:
    """The two measures catch the regression they are for: a replay whose every call copies
    and scans its whole input history."""
    from ctxsim.pipeline import replay as engine

    run = engine.Replay._call

    def copying(self, persistent, *args, **kwargs):
        copy = tuple(persistent)
        sum(1 for m in copy if m.role == "assistant")
        return run(self, History.of(copy), *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine.Replay, "_call", copying)
        copies = [copied_per_replay(sessions[n], "chatcli") for n in SIZES]
        reads = [role_reads_per_replay(sessions[n], "chatcli") for n in SIZES]
    assert copies[1] / copies[0] > LINEAR
    assert reads[1] / reads[0] > LINEAR


def test_a_stage_that_compacts_at_every_call_still_gets_a_delta_for_its_input(sessions) -> None:
    """Claude Code's auto-compact changes the length of its output whenever a compaction is in
    force, which used to cost it its `Delta` (a full scan of the history at every call). Every
    `changed_since` answer is checked against a full scan, and after the first calls they are
    answered by a Delta."""
    from ctxsim.pipeline import stages
    from ctxsim.pipeline.stages import changed_positions

    original = stages.changed_since
    answered: list[bool] = []

    def checked(before, after, c, below=None):
        got = original(before, after, c, below)
        n = len(before) if below is None else below
        assert got == changed_positions(before[:n], after)
        answered.append(c.delta is not None)
        return got

    config = {"counter": "bytes4", "cc_context_window": 60_000,
              "cc_autocompact_buffer_tokens": 5_000, "cc_summary_reserve_tokens": 5_000}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stages, "changed_since", checked)
        calls = list(replay(sessions[SIZES[0]], "claude-code", config).calls())
    compacted = sum(1 for c in calls for s in c.stages if s.report.get("compacted"))
    assert compacted >= 3 and len(calls[-1].sent) < len(calls[-1].persistent)
    assert len(answered) >= 2 * (len(calls) - 1)
    assert sum(not a for a in answered) <= 4  # the first call of each memo has none


def aivax_work(messages, monkeypatch) -> tuple[int, int]:
    """Messages the `aivax` replay measures and placeholders it makes, over the session."""
    from ctxsim.pipeline import tokens

    counted = [0, 0]
    measure, make = tokens.message_tokens, Message.with_content

    def measured(*args, **kwargs):
        counted[0] += 1
        return measure(*args, **kwargs)

    def made(self, *args, **kwargs):
        counted[1] += 1
        return make(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(tokens, "message_tokens", measured)
        patch.setattr(Message, "with_content", made)
        for _ in replay(messages, "aivax", {"counter": "bytes4"}).calls():
            pass
    return counted[0], counted[1]


def test_aivax_measures_each_message_and_makes_each_placeholder_once(sessions, monkeypatch):
    # Issue 31: `tool_context` made a new placeholder for every older result at every call and
    # `context_limit` measured every message again at every call (49.6 s for 2,000 calls).
    small, large = (aivax_work(sessions[n], monkeypatch) for n in SIZES)
    for s, big in zip(small, large, strict=True):
        assert big / s <= LINEAR, (small, large)
    results = sum(1 for m in sessions[SIZES[1]] if m.role == "tool")
    assert large[1] <= results


@pytest.mark.parametrize("config", [
    {}, {"toolContextCount": 1, "contextMaximumSize": 5000},
    {"contextOverflowAction": "TruncateHard", "contextMaximumSize": 3000},
    {"contextOverflowAction": "Throw", "contextMaximumSize": 8000}])
@pytest.mark.parametrize("profile", ["aivax", "chatcli-aivax"])
def test_the_gateway_memos_never_change_a_result(profile, config):
    from ctxsim.pipeline.trace import build_trace

    session = generate_session(120, seed=9, oversize_every=5)
    fast = replay(session.messages, profile, {"counter": "bytes4", **config})
    slow = replay(session.messages, profile, {"counter": "bytes4", **config})
    slow.memos = None
    assert build_trace(fast) == build_trace(slow)
