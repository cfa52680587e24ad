"""Histories that share structure instead of being copied at every call (issue 21).

- `Prefix`: the first messages of a list that only grows, as a sequence, without a copy.
- `History`: an immutable sequence of messages in chunks, so appending a message or replacing
  a few makes a new history in O(chunk) (O(chunk + length / chunk) when a replaced message is
  in a full chunk; the chunks not touched are shared), where a tuple would be copied whole.
  The replay's persistent history is one; stages on the hot path keep it (`frozen`,
  `with_changes`, `plus`), others turn it into a tuple.

Both read like a tuple: length, indexing, slices (a tuple), iteration, equality with a tuple
or another of them holding the same messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any, overload

from .messages import Message

_SHIFT = 7
CHUNK = 1 << _SHIFT  # messages per chunk
_MASK = CHUNK - 1


class _Shared[T](Sequence[T]):
    """What both kinds of shared history have in common: they compare equal to the tuple they
    stand for (and to each other), message by message, and are not hashable (unlike tuples)."""

    __slots__ = ()
    _n: int

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (_Shared, tuple)):
            return NotImplemented
        return len(other) == self._n and all(
            a is b or a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class Prefix[T](_Shared[T]):
    """`items[:n]` of a list that is only ever appended to (never rewritten or shortened): a
    replay's raw history, or positions a stage appended in order (`tool_context`)."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            return tuple(self._items[start:stop:step])
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("history index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return islice(self._items, self._n)

    def __reversed__(self) -> Iterator[T]:
        items = self._items
        return (items[i] for i in range(self._n - 1, -1, -1))

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickled or copied prefix holds its own messages, not the shared list.
        return (Prefix, (list(self),))


class History(_Shared[Message]):
    """An immutable history: full chunks of `CHUNK` messages, then a shorter tail. Appending
    copies the tail only (the chunk list too, once per `CHUNK` messages); replacing copies the
    chunks it lands in (and the chunk list when one of them is a full chunk)."""

    __slots__ = ("_full", "_tail", "_n")

    def __init__(self, full: tuple[tuple[Message, ...], ...] = (),
                 tail: tuple[Message, ...] = ()) -> None:
        self._full = full
        self._tail = tail
        self._n = len(full) * CHUNK + len(tail)

    @classmethod
    def of(cls, items: Sequence[Message]) -> History:
        if isinstance(items, History):
            return items
        t = tuple(items)
        cut = len(t) - len(t) % CHUNK
        return cls(tuple(t[i:i + CHUNK] for i in range(0, cut, CHUNK)), t[cut:])

    def append(self, m: Message) -> History:
        """This history with `m` at the end."""
        tail = (*self._tail, m)
        if len(tail) == CHUNK:
            return History((*self._full, tail), ())
        return History(self._full, tail)

    def replaced(self, changes: dict[int, Message]) -> History:
        """This history with the message at each position of `changes` replaced."""
        if not changes:
            return self
        base = len(self._full) * CHUNK
        rows: dict[int, list[Message]] = {}
        tail: list[Message] | None = None
        for i, m in changes.items():
            if not 0 <= i < self._n:
                raise IndexError("history index out of range")
            if i >= base:
                if tail is None:
                    tail = list(self._tail)
                tail[i - base] = m
                continue
            row = rows.get(i >> _SHIFT)
            if row is None:
                row = rows[i >> _SHIFT] = list(self._full[i >> _SHIFT])
            row[i & _MASK] = m
        full = self._full
        if rows:
            chunks = list(full)
            for c, row in rows.items():
                chunks[c] = tuple(row)
            full = tuple(chunks)
        return History(full, self._tail if tail is None else tuple(tail))

    def other_objects(self, other: History) -> list[int]:
        """Positions below the shorter length where `other` holds another object than this
        history; a chunk both share (as histories made from one another do) is passed over
        at once, so the work is the chunks that differ, not the length."""
        out: list[int] = []
        for c, (mine, theirs) in enumerate(zip(self._full, other._full, strict=False)):
            if mine is not theirs:
                base = c * CHUNK
                out.extend(base + j for j, (a, b) in enumerate(zip(mine, theirs, strict=True))
                           if a is not b)
        for i in range(min(len(self._full), len(other._full)) * CHUNK, min(self._n, other._n)):
            if self[i] is not other[i]:
                out.append(i)
        return out

    def storage(self) -> tuple[tuple[Any, ...], ...]:
        """What holds the messages: the chunk list, each chunk and the tail, all shared with
        the histories this one was made from where they did not change."""
        return (self._full, *self._full, self._tail)

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...
    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        base = len(self._full) * CHUNK
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step != 1:
                return tuple(self)[start:stop:step]
            if stop <= start:
                return ()
            if start >= base:
                return self._tail[start - base:stop - base]
            first = start >> _SHIFT
            if stop <= (first + 1) * CHUNK:
                return self._full[first][start & _MASK:stop - first * CHUNK]
            parts = chain(chain.from_iterable(self._full[first:]), self._tail)
            return tuple(islice(parts, start & _MASK, stop - first * CHUNK))
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("history index out of range")
        if index >= base:
            return self._tail[index - base]
        return self._full[index >> _SHIFT][index & _MASK]

    def __iter__(self) -> Iterator[Message]:
        return chain(chain.from_iterable(self._full), self._tail)

    def __reversed__(self) -> Iterator[Message]:
        return chain(reversed(self._tail),
                     chain.from_iterable(reversed(c) for c in reversed(self._full)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (History.of, (tuple(self),))


def frozen(history: Sequence[Message]) -> Sequence[Message]:
    """A stage's input as an immutable sequence: itself when it is a tuple or a `History`
    (no copy), else a tuple of it."""
    return history if isinstance(history, (tuple, History)) else tuple(history)


def with_changes(history: Sequence[Message], changes: dict[int, Message]) -> Sequence[Message]:
    """`history` with the messages at the positions of `changes` replaced: a `History` shares
    every chunk not touched; anything else becomes a new tuple."""
    if isinstance(history, History):
        return history.replaced(changes)
    out = list(history)
    for i, m in changes.items():
        out[i] = m
    return tuple(out)


def plus(history: Sequence[Message], m: Message) -> Sequence[Message]:
    """`history` with `m` appended (a `History` stays one)."""
    return history.append(m) if isinstance(history, History) else (*history, m)
