"""What a stage did to one message's content, as the call view shows it: the common head and
tail kept, the middle removed and added (pure Python, no Django).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ContentDiff:
    """old = prefix + removed + suffix, new = prefix + added + suffix (bytes)."""

    prefix: bytes
    removed: bytes
    added: bytes
    suffix: bytes

    @property
    def removed_bytes(self) -> int:
        return len(self.removed)


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix, by bisection over slice comparisons (done in C): a
    character loop over 90 KB results made the call view's diffs its slowest part."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            low = mid
        else:
            high = mid - 1
    return low


def content_diff(old: bytes, new: bytes) -> ContentDiff:
    """Common head and tail kept, the middle shown as removed/added: exactly how truncation
    previews, spills and summaries rewrite a result."""
    head = _common_prefix(old, new)
    tail = _common_suffix(old, new, min(len(old), len(new)) - head)
    return ContentDiff(
        prefix=old[:head],
        removed=old[head : len(old) - tail],
        added=new[head : len(new) - tail],
        suffix=old[len(old) - tail :] if tail else b"",
    )
