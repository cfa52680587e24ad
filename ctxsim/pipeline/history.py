"""`Prefix`: the first messages of a list that only grows, as a sequence, without a copy.

The replay's raw history only ever grows (one message appended after another), and every call
reports it as it was at that call. A tuple per call would copy the whole history at every call:
the work of a replay would grow with the square of its length (issue 21). A `Prefix` is a
fixed-length window on the shared list instead: O(1) to make, read like a tuple (length,
indexing, slices, iteration, equality with any sequence of the same messages).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, overload

from .messages import Message


class Prefix(Sequence[Message]):
    """`items[:n]` of a list that is only ever appended to (never rewritten or shortened)."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[Message], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Message, ...]: ...
    def __getitem__(self, index: int | slice) -> Message | tuple[Message, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            return tuple(self._items[start:stop:step])
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("history index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        return islice(self._items, self._n)

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        return (items[i] for i in range(self._n - 1, -1, -1))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (Prefix, tuple, list)):
            return NotImplemented
        return len(other) == self._n and all(
            a is b or a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Prefix({list(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # A pickled or copied prefix holds its own messages, not the shared list.
        return (Prefix, (list(self),))


def as_tuple(history: Sequence[Message]) -> tuple[Message, ...]:
    """`tuple(history)`: the same object for a tuple, a copy of a `Prefix`'s messages."""
    return history if isinstance(history, tuple) else tuple(history)
