"""`History` and `Prefix` read exactly like the tuple they stand for (issue 21)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.history import CHUNK, History, Prefix, frozen, plus, with_changes
from ctxsim.pipeline.messages import Message, ToolCall

POOL = [Message.of("user", f"m{i}") for i in range(8)]
operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 7)),
    st.tuples(st.just("replace"), st.dictionaries(st.integers(0, 10_000), st.integers(0, 7),
                                                  max_size=4)),
), max_size=60)


def _same(h, t: tuple) -> None:
    assert len(h) == len(t) and tuple(h) == t and h == t and t == h
    assert tuple(reversed(h)) == t[::-1]
    n = len(t)
    for a in (-n - 1, -1, 0, 1, CHUNK - 1, CHUNK, n // 2, n, n + 1):
        for b in (None, -1, 0, CHUNK, CHUNK + 1, 2 * CHUNK + 3, n - 1, n):
            assert h[a:b] == t[a:b]
        if -n <= a < n:
            assert h[a] is t[a]
    assert h[::3] == t[::3]


@settings(max_examples=60)
@given(st.integers(0, 3 * CHUNK + 5), operations)
def test_a_history_reads_like_the_tuple_it_stands_for(start, ops) -> None:
    reference = tuple(POOL[i % 8] for i in range(start))
    history = History.of(reference)
    _same(history, reference)
    for op, arg in ops:
        before, kept = history, reference
        if op == "append":
            history, reference = history.append(POOL[arg]), (*reference, POOL[arg])
        elif reference:
            changes = {i % len(reference): POOL[k] for i, k in arg.items()}
            history = history.replaced(changes)
            out = list(reference)
            for i, m in changes.items():
                out[i] = m
            reference = tuple(out)
        _same(history, reference)
        _same(before, kept)  # the history it was made from is unchanged


def test_helpers_keep_a_history_and_give_tuples_otherwise() -> None:
    h = History.of(POOL)
    assert frozen(h) is h and isinstance(plus(h, POOL[0]), History)
    assert isinstance(with_changes(h, {1: POOL[0]}), History)
    t = tuple(POOL)
    assert frozen(t) is t and frozen(list(POOL)) == t
    assert with_changes(t, {1: POOL[0]}) == (POOL[0], POOL[0], *POOL[2:])
    assert plus(t, POOL[1]) == (*POOL, POOL[1])
    assert h != list(POOL)  # like a tuple: never equal to a list


def test_a_prefix_is_a_fixed_window_on_a_growing_list() -> None:
    items = list(POOL[:3])
    p = Prefix(items)
    items.extend(POOL[3:])
    assert len(p) == 3 and tuple(p) == tuple(POOL[:3]) and p == tuple(POOL[:3])
    assert p[-1] is POOL[2] and p[1:] == tuple(POOL[1:3]) and list(reversed(p)) == POOL[2::-1]
    try:
        p[3]
    except IndexError:
        pass
    else:
        raise AssertionError("a prefix reads nothing past its length")


def test_with_content_keeps_every_other_field() -> None:
    """`Message.with_content` names every field (it is faster than `dataclasses.replace`): a
    field added to Message and forgotten there would be lost in every rewrite."""
    from dataclasses import fields, replace

    original = Message(role="tool", content=b"before", name="n",
                       tool_calls=(ToolCall("c", "Read", "{}"),), tool_call_id="call-1",
                       is_error=True, error_code="E1", agent_feedback=True,
                       meta={"usage": {"input": 3}}, origin=7)
    # Every field set to a value other than its default, so a dropped one shows.
    defaults = Message(role="user")
    for f in fields(Message):
        if f.name != "content":
            assert getattr(original, f.name) != getattr(defaults, f.name), f.name
    rewritten = original.with_content(b"after")
    assert rewritten.content == b"after"
    expected = replace(original, content=b"after")
    for f in fields(Message):
        assert getattr(rewritten, f.name) == getattr(expected, f.name), f.name
