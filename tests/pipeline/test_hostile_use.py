"""Issue 20 ("Holds under hostile use"): bounded work in the pure engine."""

from __future__ import annotations

import pytest

from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.replay import Replay, replay
from ctxsim.pipeline.stages import pairing
from tests.pipeline.helpers import assistant, tool, user


def _scanned_positions(monkeypatch, messages) -> tuple[int, list]:
    """Replay `messages` with the default profile; return how many positions the pairing
    prepass scanned over the whole replay (from its resume point to the end), and the calls."""
    scanned = 0
    inner = pairing.needs_repair

    def counting(history, ctx=None):
        nonlocal scanned
        scanned += len(history) - pairing._resume_point(history, ctx)
        return inner(history, ctx)

    monkeypatch.setattr(pairing, "needs_repair", counting)
    calls = list(replay(messages).calls())
    return scanned, calls


@pytest.mark.parametrize("with_tools", [False, True])
def test_the_pairing_prepass_scans_each_position_a_bounded_number_of_times(
        monkeypatch, with_tools):
    """issue 20 item 7: with no tool calls the memo's resume point stayed 0, so every call
    rescanned the whole history (5k calls 5.7 s, 20k 90.6 s)."""
    n = 400
    messages = []
    for i in range(n):
        messages.append(user(f"question {i}"))
        if with_tools and i % 7 == 0:
            messages += [assistant(f"c{i}"), tool(f"c{i}", f"result {i}")]
        messages.append(assistant(text=f"answer {i}"))
    scanned, calls = _scanned_positions(monkeypatch, messages)
    assert len(calls) >= n
    # Linear: a few positions per call, not the ~n²/2 = 80,000+ of a rescan from 0.
    assert scanned <= 4 * len(messages)


def test_the_resumed_prepass_still_finds_a_broken_pair_after_plain_messages(monkeypatch):
    """issue 20 item 7: resuming at a plain message must not hide a later orphan result."""
    messages = [user("a"), assistant(text="b"), user("c"), assistant(text="d"),
                tool("ghost", "orphan"), assistant(text="e")]
    _, calls = _scanned_positions(monkeypatch, messages)
    with_memo = [c.sent for c in calls]
    plain = [c.sent for c in Replay(messages, resolve("chatcli", None), use_memos=False).calls()]
    assert with_memo == plain
    assert all(m.role != "tool" for m in calls[-1].sent)
