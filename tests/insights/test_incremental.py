"""Issue 21: the incremental insights (cache walk resumed at the first changed message, costs
and drops updated from there, lost references answered from a line index) give exactly what
the full re-walk of every call gives (`tests/insights/reference.py`, the old algorithm)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxsim.generator import generate_session
from ctxsim.insights.cache import CacheSimulator, shared_prefix
from ctxsim.insights.loss import LossTracker
from ctxsim.insights.prices import cache_rule
from ctxsim.insights.report import analyse
from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.replay import CallResult, replay
from ctxsim.pipeline.tokens import get_counter, message_tokens
from tests.factories import lost_path_transcript, rereading_transcript
from tests.insights.reference import (
    ReferenceCacheSimulator,
    ReferenceLossTracker,
    reference_analyse,
)

RULES = [cache_rule(), cache_rule("claude-haiku-4.5"), cache_rule("claude-sonnet-4.5", "1h"),
         cache_rule("gpt-5"), cache_rule("gpt-5", "10m"), cache_rule("gpt-4o")]
RULE = st.sampled_from(RULES)
COUNTER = get_counter("bytes4")


# --- the cache simulation alone -----------------------------------------------------------------

@st.composite
def prompt_sequences(draw):
    """Prompts of small integer keys: each keeps a prefix of the previous one (sometimes all
    of it, sometimes little), may rewrite one key in the middle, and appends a few; times move
    on by seconds, now and then past a lifetime, sometimes unknown."""
    prompts = []
    prev: list[int] = []
    clock = 0.0
    for _ in range(draw(st.integers(1, 14))):
        cut = draw(st.sampled_from([len(prev), len(prev), draw(st.integers(0, len(prev)))]))
        keys = prev[:cut]
        if keys and draw(st.booleans()):
            keys[draw(st.integers(0, len(keys) - 1))] = draw(st.integers(0, 5))
        keys += draw(st.lists(st.integers(0, 5), max_size=4))
        costs = [draw(st.sampled_from([0, 100, 400, 900, 2000])) for _ in keys]
        clock += draw(st.sampled_from([0, 1, 30, 200, 299, 301, 700, 3601]))
        at = draw(st.sampled_from([clock, clock, None, clock - 50]))
        hint = draw(st.sampled_from(["exact", "lower", "none"]))
        prompts.append((keys, costs, at, hint))
        prev = keys
    return prompts


@settings(max_examples=400, deadline=None)
@given(prompt_sequences(), RULE)
def test_the_resumed_walk_finds_what_the_full_walk_finds(prompts, rule):
    sim, ref = CacheSimulator(rule), ReferenceCacheSimulator(rule)
    prev: list[int] = []
    for n, (keys, costs, at, hint) in enumerate(prompts):
        same = shared_prefix(prev, keys)
        kept = {"exact": same, "lower": same // 2, "none": None}[hint]
        assert sim.step(keys, costs, at, kept) == ref.step(keys, costs, at), n
        prev = keys


def test_the_shared_prefix_counts_equal_items_and_trusts_its_start():
    a = tuple(range(100))
    assert shared_prefix(a, a) == 100
    assert shared_prefix(a, (*a[:57], -1, *a[58:])) == 57
    assert shared_prefix(a, a[:30]) == 30
    assert shared_prefix([], a) == 0
    assert shared_prefix(a, [*a[:3], -1], start=3) == 3


def test_a_repeated_prompt_reads_itself_and_an_expired_one_is_written_again():
    sim = CacheSimulator(cache_rule())
    sim.step(["a", "b"], [1000, 500], at=0)
    again = sim.step(["a", "b"], [1000, 500], at=10, kept=2)
    assert (again.cached, again.written) == (1500, 0)
    late = sim.step(["a", "b"], [1000, 500], at=400, kept=2)
    assert (late.cached, late.written) == (0, 1500)


# --- the loss tracker and the whole analysis over synthetic calls ------------------------------

LINES = [b"def parse_args(argv):", b"  return load_config(path)", b"see src/app/main.py",
         b"KeyError: 'token'", b"offset 1234567 reached", b"import os", b"ok", b"",
         b"build/generated/schema_v2.go:12", b"renderPage(x) failed"]
TEXTS = ["reading src/app/main.py again", "parse_args looks wrong", "fix build/generated/"
         "schema_v2.go", "nothing to add", "the KeyError comes from load_config",
         "offset 1234567 again", "renderPage(x) then render_page"]
TOOLS = [("Read", {"path": "src/app/main.py"}), ("Read", {"path": "util.go"}),
         ("Grep", {"pattern": "parse_args"}), ("Bash", {"cmd": "make"})]


@dataclass
class FakeReplay:
    """What `analyse` reads of a replay: the transcript, the counter and the calls."""

    messages: list[Message]
    results: list[CallResult]
    counter: object = field(default_factory=lambda: COUNTER)

    def calls(self):
        return iter(self.results)


def _stamp(seconds: float) -> dict:
    return {"timestamp": datetime.fromtimestamp(seconds, UTC).isoformat()}


@st.composite
def sessions(draw):
    """A transcript of tool rounds and, per call, a prompt made of its raw history: each tool
    result kept, truncated, replaced, removed or duplicated (a choice that often persists, so
    messages are shared between calls), sometimes an injected message, sometimes a failed
    call; the replay's `sent_kept` is exact, a lower bound or unknown."""
    messages: list[Message] = [Message.of("system", "You are terse.", origin=0)]
    clock = 1_000_000.0
    rounds = draw(st.integers(1, 9))
    for r in range(rounds):
        clock += draw(st.sampled_from([2, 5, 20, 60, 290, 400, 4000]))
        if draw(st.booleans()):
            messages.append(Message.of("user", draw(st.sampled_from(TEXTS)),
                                       origin=len(messages), meta=_stamp(clock)))
        picked = draw(st.lists(st.sampled_from(TOOLS), min_size=0, max_size=2))
        calls = [ToolCall(f"c{r}-{i}", name, json.dumps(args))
                 for i, (name, args) in enumerate(picked)]
        messages.append(Message.of("assistant", draw(st.sampled_from(TEXTS)), tool_calls=calls,
                                   origin=len(messages), meta=_stamp(clock)))
        for c in calls:
            body = b"\n".join(draw(st.lists(st.sampled_from(LINES), min_size=1, max_size=4)))
            body *= draw(st.sampled_from([1, 3, 30, 400]))
            messages.append(Message(role="tool", content=body, tool_call_id=c.id,
                                    origin=len(messages)))
    answers = [i for i, m in enumerate(messages) if m.role == "assistant"] + [None]
    made: dict[tuple[int, str], Message] = {}
    choice: dict[int, str] = {}
    results, prev_sent = [], ()
    for k, answer in enumerate(answers):
        raw = tuple(messages[:answer] if answer is not None else messages)
        sent = []
        for m in raw:
            if m.role == "tool":
                if m.origin not in choice or draw(st.integers(0, 9)) == 0:
                    choice[m.origin] = draw(st.sampled_from(
                        ["keep", "keep", "truncate", "replace", "remove", "twice"]))
                how = choice[m.origin]
                if how == "remove":
                    continue
                if how in ("truncate", "replace"):
                    key = (m.origin, how)
                    if key not in made or draw(st.integers(0, 9)) == 0:  # sometimes a copy
                        text = m.content[:20] if how == "truncate" else b"[cleared]"
                        made[key] = Message(role="tool", content=text,
                                            tool_call_id=m.tool_call_id, origin=m.origin)
                    m = made[key]
                sent.append(m)
                if how == "twice":  # another message from the same result (a split)
                    sent.append(Message(role="tool", content=m.content[:7],
                                        tool_call_id=m.tool_call_id, origin=m.origin))
            else:
                sent.append(m)
        if sent and draw(st.integers(0, 6)) == 0:
            sent.insert(draw(st.integers(0, len(sent))), Message.of("system", "reminder"))
        sent_t = tuple(sent)
        same = shared_prefix(prev_sent, sent_t)
        identical = next((i for i, (a, b) in enumerate(zip(prev_sent, sent_t, strict=False))
                          if a is not b), min(len(prev_sent), len(sent_t)))
        kept = draw(st.sampled_from([identical, identical // 2, None, 0]))
        assert kept is None or kept <= same
        tokens = (sum(message_tokens(m, COUNTER) for m in sent_t)
                  + draw(st.sampled_from([50, 50, 50, 50, 7])))
        results.append(CallResult(
            call_index=k, run_index=0, loop_turn=k, response_input_index=answer, stages=[],
            raw_history=raw, persistent=sent_t, sent=sent_t, spills=[], raw_tokens=tokens,
            sent_tokens=tokens, error="context_overflow" if draw(st.integers(0, 12)) == 0
            else None, sent_kept=kept))
        prev_sent = sent_t
    return FakeReplay(messages, results)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), RULE)
def test_the_incremental_analysis_matches_the_full_one(session, rule):
    fast, slow = analyse(session, rule), reference_analyse(session, rule)
    assert fast.calls == slow.calls
    assert fast.events == slow.events
    assert fast.loss == slow.loss


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_the_loss_tracker_finds_what_the_full_scan_finds(session):
    fast, slow = LossTracker(session.messages), ReferenceLossTracker(session.messages)
    for call in session.results:
        fast.step(call)
        slow.step(call)
        assert fast.report == slow.report


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.lists(st.sampled_from(LINES), min_size=1, max_size=5).map(b"\n".join),
    st.binary(max_size=30).map(lambda b: b.replace(b"\x00", b"a/b")),
    st.lists(st.sampled_from([b"main.py", b"src/app/main.py", b"parse_args", b"x", b"(Error)"]),
             max_size=4).map(b" ".join),  # known words in new lines
    st.sampled_from(["main.py", "parse_args", "src/app", "1234567", "render", "Error"]),
    st.text(alphabet="ab./_-\n :", min_size=1, max_size=4),
), max_size=30))
def test_the_line_index_finds_what_a_substring_search_finds(events):
    """Results (bytes) and lookups (str) interleaved: every lookup lists the results seen so
    far that contain the identifier, in the order seen, as a scan of each would."""
    tracker = LossTracker([])
    for event in events:
        if isinstance(event, bytes):
            m = Message(role="tool", content=event, origin=len(tracker._seen))
            tracker._seen.append(m)
        else:
            needle = event.encode()
            assert tracker._holding(event, needle) == [
                m.origin for m in tracker._seen if needle in m.content]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions(), st.integers(0, 6))
def test_a_tracker_whose_transcript_differs_from_the_replayed_one_matches_too(session, where):
    """The session's own index serves lookups only while the results seen are the session's
    (same contents, in order); past a difference the seen results are indexed instead."""
    results = [i for i, m in enumerate(session.messages) if m.role == "tool"]
    messages = list(session.messages)
    for i in results[where:]:
        messages[i] = Message(role="tool", content=b"other " + messages[i].content[::-1],
                              tool_call_id=messages[i].tool_call_id, origin=i)
    fast, slow = LossTracker(messages), ReferenceLossTracker(messages)
    for call in session.results:
        fast.step(call)
        slow.step(call)
    assert fast.report == slow.report


def test_a_tracker_fed_an_unrelated_history_starts_over():
    messages = rereading_transcript()
    calls = list(replay(messages, "anthropic-clear-tool-uses", {
        "trigger": {"type": "tool_uses", "value": 1},
        "keep": {"type": "tool_uses", "value": 1}}).calls())
    fast, slow = LossTracker(messages), ReferenceLossTracker(messages)
    for call in [*calls, *calls]:  # the second pass goes back to a shorter history
        fast.step(call)
        slow.step(call)
    assert fast.report == slow.report and fast.report.rereads


# --- real replays ------------------------------------------------------------------------------

CLEAR = {"trigger": {"type": "tool_uses", "value": 1}, "keep": {"type": "tool_uses", "value": 1}}


@pytest.mark.parametrize("profile", ["none", "chatcli", "aivax", "anthropic-clear-tool-uses",
                                     "claude-code", "codex", "openhands"])
def test_real_replays_of_a_generated_session_match_the_full_walk(profile):
    session = generate_session(60, 3)
    for rule in (cache_rule(), cache_rule("gpt-5"), cache_rule("claude-haiku-4.5")):
        fast = analyse(replay(session, profile, {"counter": "cl100k_base"}), rule)
        slow = reference_analyse(replay(session, profile, {"counter": "cl100k_base"}), rule)
        assert (fast.calls, fast.events, fast.loss) == (slow.calls, slow.events, slow.loss)


@pytest.mark.parametrize("transcript", [rereading_transcript, lost_path_transcript])
def test_real_replays_with_rereads_and_lost_references_match_the_full_walk(transcript):
    for profile, config in (("anthropic-clear-tool-uses", CLEAR), ("aivax", {}),
                            ("chatcli", {})):
        fast = analyse(replay(transcript(), profile, config), cache_rule())
        slow = reference_analyse(replay(transcript(), profile, config), cache_rule())
        assert (fast.calls, fast.events, fast.loss) == (slow.calls, slow.events, slow.loss)
    rep = analyse(replay(transcript(), "anthropic-clear-tool-uses", CLEAR), cache_rule())
    assert rep.loss.rereads or rep.loss.lost  # the comparison saw some


def test_the_replay_says_which_leading_messages_it_sent_again():
    """`CallResult.sent_kept` is a lower bound of the objects shared with the previous call's
    prompt, for every built-in profile whose stages keep lengths (None otherwise)."""
    from ctxsim.pipeline.profiles import PROFILES

    session = generate_session(40, 5)
    for profile in sorted(PROFILES):
        prev: tuple[Message, ...] = ()
        for call in replay(session, profile).calls():
            if call.sent_kept is not None:
                kept = call.sent_kept
                assert kept <= min(len(prev), len(call.sent)) or not prev
                assert all(a is b for a, b in zip(prev[:kept], call.sent[:kept], strict=True))
            prev = call.sent


# A prompt as a list of message numbers: each a message object made once (so a kept one is the
# very object), some without an origin (injected).
_POOL = [Message.of("tool" if n % 3 else "user", f"m{n}", origin=None if n % 7 == 6 else n // 2)
         for n in range(40)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.integers(0, len(_POOL) - 1), max_size=25), min_size=1,
                max_size=12))
def test_the_prompt_index_edited_in_place_is_the_prompt_taken_and_its_changes_rebuild_it(
        prompts):
    """`PromptIndex.take` edits its prompt in place (ChatCLI's rewrite near the end copied
    the whole prompt at every call); the changes it returns turn the last prompt into this one,
    and each origin's last copy is the one the prompt holds last."""
    from ctxsim.insights.cache import PromptIndex

    index = PromptIndex()
    for numbers in prompts:
        sent = [_POOL[n] for n in numbers]
        before = list(index.messages)
        position = shared_prefix(before, sent, 0)
        changes = index.take(sent, position)
        assert index.messages == sent
        # Its serials ascend along the prompt and name its copies (what `last` reads).
        serials = index._serials
        assert len(serials) == len(sent) and all(map(int.__lt__, serials, serials[1:]))
        assert all(index._by_serial[s] is m for s, m in zip(serials, sent, strict=True))
        rebuilt = list(before)
        for start, end, put, removed in reversed(changes):
            assert rebuilt[start:end] == removed
            rebuilt[start:end] = put
        assert rebuilt == sent
        origins = {m.origin for m in sent} - {None}
        for origin in {m.origin for m in _POOL} - {None}:
            last = next((m for m in reversed(sent) if m.origin == origin), None)
            assert index.last(origin) is last
            assert (origin in index) == (origin in origins)
