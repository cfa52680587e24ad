"""Where a content may be cut without changing its token count, and the tokenizing of one
content in pieces (SPEC §5, issue 21). Pure functions of the bytes; `tokens` builds its counter
on them, and the counting worker processes (`token_pool`) run the same `tokenize`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

# Byte classes for `digit_shape`: ASCII digits become "0", non-ASCII bytes "\x80", the rest "a"
# (bytes.translate runs in C; a regex over every spill preview cost more than its tokenizing).
_CLASSES = bytes(
    0x30 if 0x30 <= b <= 0x39 else 0x80 if b >= 0x80 else 0x61 for b in range(256)
)
_TO_ZERO = bytes.maketrans(b"0123456789", b"0000000000")


def digit_shape(content: bytes) -> bytes | None:
    """`content` with every ASCII digit made `0`, when that provably keeps its token count.

    In cl100k_base and o200k_base a run of digits is always split into pieces of its own (the
    pre-tokenizer's `\\p{N}{1,3}`; no other alternative takes a digit), and every string of one
    to three ASCII digits is a single token (checked in tests for all 1,110). So the values of
    the digits never change the count, only the lengths of their runs. A spill preview is
    re-made at every call with a new file counter in its path: with this key it is tokenized
    once, not once per call. Returns None when there is no digit, or when a digit touches a
    non-ASCII character (which could be another numeral of the same piece).
    """
    if content.isascii():  # the common case: one pass to make the shape, none to classify
        shape = content.translate(_TO_ZERO)
        return None if shape == content else shape
    classes = content.translate(_CLASSES)
    if b"0" not in classes or digit_touches_non_ascii(classes):
        return None
    return content.translate(_TO_ZERO)


# Non-ASCII bytes `digit_touches_non_ascii` walks one by one before it scans the whole text.
_WALK_BYTES = 64


def digit_touches_non_ascii(classes: bytes) -> bool:
    """Whether `classes` (a text through `_CLASSES`) holds `\\x800` or `0\\x80`: a digit next to
    a non-ASCII byte. The non-ASCII bytes are found with `find` (memchr) and their neighbours
    looked at, which is quicker than the two scans of the whole text when they are few, as in a
    ChatCLI spill preview (its marker's em dash: every preview takes this path, about a
    thousand a 200-call replay at a low cap, 15 µs each with the scans, issue 31). Past
    _WALK_BYTES of them, the two scans."""
    find, n, walked = classes.find, len(classes), 0
    pos = find(b"\x80")
    while pos >= 0:
        if pos and classes[pos - 1] == 0x30:
            return True
        end = pos + 1
        while end < n and classes[end] == 0x80:
            end += 1
        if end < n and classes[end] == 0x30:
            return True
        walked += end - pos
        if walked > _WALK_BYTES:
            return b"\x800" in classes or b"0\x80" in classes
        pos = find(b"\x80", end)
    return False


# Where a content may be cut without changing its count in cl100k_base or o200k_base. Both
# encodings split text into pieces with a regex and count each piece on its own, so a cut is
# exact when it falls between two pieces of the whole text's split, and the regex splits the
# two sides alone the same way. That holds, with ASCII neighbours, at:
#   - after a line break followed by a letter or digit: no piece runs from "\n" into a letter
#     or digit (letter pieces take an optional leading character that is never \r or \n);
#   - before a space between two letters: the letter run ends there and " word" begins;
#   - between a letter and a digit, either way: letter runs and digit runs are separate pieces
#     (digits are `\p{N}{1,3}`, and letter pieces take no leading digit).
# The regex has no look-behind, and the only look-ahead (`\s+(?!\S)`) never decides a piece
# ending at one of these points. Bytes are cut next to ASCII bytes, never inside a UTF-8
# sequence, so decoding each chunk with "replace" gives the same text. Tests check the sum
# against the whole count with hypothesis, for both encodings.
_EXACT_CUT = re.compile(
    rb"(?<=\n)(?=[A-Za-z0-9])|(?<=[A-Za-z])(?= [A-Za-z])|(?<=[A-Za-z])(?=[0-9])"
    rb"|(?<=[0-9])(?=[A-Za-z])"
)
# The same places, found by the byte before them: a pattern that starts with a byte class is
# scanned for faster than one that starts with look-behinds (about 1.5 against 1 µs a search).
_BEFORE_CUT = re.compile(rb"\n(?=[A-Za-z0-9])|[A-Za-z](?= [A-Za-z]|[0-9])|[0-9](?=[A-Za-z])")


def next_cut(content: bytes, pos: int, endpos: int | None = None) -> int:
    """The first exact cut at or after `pos` (what `_EXACT_CUT.search(content, pos, endpos)`
    finds), or -1. Its look-aheads see no byte at or past `endpos` (default: the end)."""
    found = _BEFORE_CUT.search(content, max(pos - 1, 0),
                               len(content) if endpos is None else endpos)
    return -1 if found is None else found.start() + 1


def exact_chunks(content: bytes, size: int) -> Iterator[bytes]:
    """`content` in consecutive pieces of about `size` bytes or more, cut only where the token
    count of cl100k_base and o200k_base is the sum of the pieces' counts. A stretch with no
    such place (one 50 MB word) stays whole."""
    start, n = 0, len(content)
    while n - start > size:
        cut = next_cut(content, start + size)
        if cut < 0:
            break
        yield content[start:cut]
        start = cut
    yield content[start:]


# Pieces (issue 21): a long content is tokenized as head pieces, a middle, and two tail pieces
# from the first exact cuts at or after TAIL_REGION and TAIL_PIECE bytes before its end, all cut
# at exact points of the content itself, so the sum is its count whatever the pieces are. The
# head and tail pieces' counts are kept by digest: the previews and stubs the stages make (a
# head of the content, a marker, its tail) cut the same pieces where they share the content's
# bytes, so only the part around the marker is tokenized. Each piece costs a search, a digest
# and a call of the tokenizer (~3 µs on a fast machine).
#
# The head pieces end where the stages' previews end their heads (`PREVIEW_HEADS`, issue 31): a
# content long enough for such a preview is cut at the last exact cut before the head that
# preview would keep (a line break, found as the stage finds it), and the preview, which begins
# with those bytes and then its marker, finds the same cut from its marker. Between two of
# those cuts, and past the last, a head piece every HEAD_PIECE bytes or so while the stretch is
# longer than two of them (a preview made with another head length still shares the pieces
# before it). Before this, head pieces every 768 bytes to ~4.6 KB: a microcompact preview
# re-tokenized the ~450 bytes between its content's last shared cut and its marker, and the
# 2,000-call cold replay handed the tokenizer 3.6 MB for its 4,252 previews (now 1.0 MB), and
# a long content had one piece more (53,600 tokenizer calls, now 49,100).
PIECE_MIN = 2048
HEAD_PIECE = 768
HEAD_REGION = 4608  # head pieces of the last stretch end before (the marks may be past it)
TAIL_PIECE = 384
# A second tail piece before the last one, from the first exact cut at or after TAIL_REGION
# bytes before the end; the stretch head pieces fill ends before it. A spill preview keeps about
# the last 1,000 bytes of its content (from the line after), so both of its tail pieces are the
# content's and only the stretch around its marker is tokenized: a new spill cap of 6,000 bytes
# on ten 200-call sessions tokenized 1.6 MB instead of 3.6, and each first replay of it in a web
# process took 129 ms of CPU instead of 166 (issue 31).
TAIL_REGION = 896


@dataclass(frozen=True)
class PreviewHead:
    """How a stage's preview keeps a content's head: its first `length` bytes, or up to just
    after the last line break before them when that lies past `snap_after` (None: never), then
    a marker that starts with `marker`. Only contents longer than `shortest` get one."""

    length: int
    snap_after: int | None
    marker: bytes
    shortest: int

    def end(self, content: bytes) -> int:
        """Where the preview of `content` ends its head, as the stage finds it."""
        if self.snap_after is None:
            return self.length
        k = content.rfind(b"\n", 0, self.length)
        return k + 1 if k > self.snap_after else self.length


# The stages' previews with their default lengths, shortest head first (tests check that each
# stage's preview is found and shares its content's pieces up to its marker):
PREVIEW_HEADS = (
    # microcompact's `truncateToolResultPreview` (ChatCLI: 2,000 + 500 + 100 bytes and more)
    PreviewHead(2000, 1000, b"\n[... ", 2600),
    # the budget's spill preview (head 4,000, back to a line break past 2,000)
    PreviewHead(4000, 2000, b"\n\n... [", 4000),
    # tool_cap's `TruncateForLLM` (head 5,000 as is, for results past caps of 6,000 and more)
    PreviewHead(5000, None, b"\n\n... [TRUNCATED", 6000),
)
# How far back from a head's end its cut is looked for.
MARK_REACH = 64
# The last exact cut before a head's end that needs no byte at or past it: after an ASCII
# letter or digit followed by an ASCII byte that is neither (nor an apostrophe). No piece of
# either encoding's split runs from a letter or digit into such a byte (letter pieces end in
# letters, or in a contraction that needs a letter after the apostrophe; digit pieces are
# digits; punctuation and space pieces hold neither), and the pieces from that byte on are the
# same whatever precedes it (tests check it with hypothesis, for both encodings). The greedy
# `.*` makes the match end at the last such place in the searched stretch.
_LAST_EDGE = re.compile(rb"(?s:.*)[A-Za-z0-9](?=[\x00-\x26\x28-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f])")


def edge_before(content: bytes, end: int, start: int = 0) -> int:
    """The last cut of `_LAST_EDGE` in (start, end), within MARK_REACH bytes before `end`, or
    -1: exact in `content` and in any text that shares its first `end` bytes."""
    found = _LAST_EDGE.match(content, max(start, end - MARK_REACH), end)
    return -1 if found is None else found.end()


def head_marks(content: bytes) -> tuple[list[int], int]:
    """The cuts before the heads the stages' previews of `content` would keep, ascending, and
    where the marker of the preview `content` is starts (-1: none found; no cut past it)."""
    marks: list[int] = []
    last = 0
    n = len(content)
    for shape in PREVIEW_HEADS:
        marker = content.find(shape.marker, HEAD_PIECE, shape.length + len(shape.marker))
        end = marker if marker >= 0 else shape.end(content) if n > shape.shortest else -1
        if end > 0:
            cut = edge_before(content, end, last)
            if cut > last:
                marks.append(cut)
                last = cut
        if marker >= 0:
            return marks, marker
    return marks, -1


def preview_cuts(content: bytes) -> tuple[list[int], list[int], bool]:
    """`piece_cuts`, and whether `content` is a stage's preview (its marker was found)."""
    n = len(content)
    if n < PIECE_MIN:
        return [], [], False
    marks, marker = head_marks(content)
    heads: list[int] = []
    start = 0
    # Head pieces fill each stretch before a mark, and past the last one (not in a preview:
    # its marker follows) up to HEAD_REGION, ending before the tail pieces' region.
    bounds = [(mark, True) for mark in marks]
    if marker < 0:
        bounds.append((min(HEAD_REGION, n - TAIL_REGION), False))
    for bound, is_mark in bounds:
        while bound - start > 2 * HEAD_PIECE:
            cut = next_cut(content, start + HEAD_PIECE, bound)
            if cut < 0:
                break
            heads.append(cut)
            start = cut
        if is_mark:
            heads.append(bound)
            start = bound
    tails: list[int] = []
    for back in (TAIL_REGION, TAIL_PIECE):
        cut = next_cut(content, max(n - back, start + 1))
        if cut > 0 and (not tails or cut > tails[-1]):
            tails.append(cut)
    return heads, tails, marker >= 0


def piece_cuts(content: bytes) -> tuple[list[int], list[int]]:
    """The head cuts of a long content and where its tail pieces start (ascending; none: no
    tail piece). A content shorter than PIECE_MIN has none: it is tokenized whole."""
    heads, tails, _ = preview_cuts(content)
    return heads, tails


_NO_SPECIAL: frozenset[str] = frozenset()


def text_counter(encoding: Any) -> Callable[[str], int]:
    """`len(encoding.encode_ordinary(text))`, without the list when `encoding` is tiktoken's.

    tiktoken's core hands its tokens over as a buffer too (what `Encoding.encode_to_numpy`
    uses, "avoids the overhead of copying the token buffer into a Python list"); its length is
    the count. That is `encode` with no special token allowed, which finds special-token texts
    and, none being allowed, encodes them as ordinary text: the tokens of `encode_ordinary`
    (tests check both on texts made of special-token strings). One Python int per token less:
    about 5 % of the tokenizing. Anything else with an `encode_ordinary` (the tests' spies) is
    counted through it; so is a text the core refuses (lone surrogates, which
    `encode_ordinary` mends first)."""
    encode = encoding.encode_ordinary
    to_buffer = getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
    if to_buffer is None:
        return lambda text: len(encode(text))

    def count(text: str) -> int:
        try:
            return memoryview(to_buffer(text, _NO_SPECIAL)).nbytes >> 2  # 4 bytes a token
        except UnicodeEncodeError:
            return len(encode(text))

    return count


# A last line appended to a preview's tail (microcompact's recall line "[full content
# recoverable via @recall <<ccr:…>>]") would hide the tail piece it shares. So a preview (its
# marker found) whose last line is at most LAST_LINE bytes is also tried as: the tail piece that
# ends at that line's break, searched for as the content would be searched were it to end there
# (a hit means its bytes are a known tail piece), then the last line on its own. The cut is
# after the last ASCII letter or digit before that line break (`_LAST_EDGE`: exact), so the
# content's bytes between it and the break (a JSON content's closing "}") are tokenized with
# the last line, and taken off the known piece's count (tokenized alone).
LAST_LINE = 256


def tokenize(encoding: Any, content: bytes, pieces: dict[bytes, int],
             chunk_bytes: int = 1024 * 1024, learned: dict[bytes, int] | None = None) -> int:
    """The token count of `content` (exactly `len(encode_ordinary(decoded))`), its head and tail
    pieces looked up in and added to `pieces` (by SHA-256), long middles in exact chunks. A
    piece counted here is also put in `learned`, when given (to be stored for other
    processes: a preview of the content begins and ends with the same pieces)."""
    count = text_counter(encoding)
    sha256 = hashlib.sha256

    def piece(part: bytes) -> int:
        digest = sha256(part).digest()
        known = pieces.get(digest)
        if known is None:
            known = pieces[digest] = count(part.decode("utf-8", "replace"))
            if learned is not None:
                learned[digest] = known
        return known

    def whole(part: bytes) -> int:
        if len(part) <= chunk_bytes:
            return count(part.decode("utf-8", "replace"))
        return sum(count(chunk.decode("utf-8", "replace"))
                   for chunk in exact_chunks(part, chunk_bytes))

    heads, tails, previewed = preview_cuts(content)
    if not heads and not tails:
        return whole(content)
    start = heads[-1] if heads else 0
    line = content.rfind(b"\n", start + 1) if previewed else -1
    if 0 < len(content) - line <= LAST_LINE:
        cut = next_cut(content, line - TAIL_PIECE, line)
        body = edge_before(content, line + 1, cut) if cut > start else -1
        if body > 0:
            known = pieces.get(sha256(content[cut:line]).digest())
            if known is not None:
                if body < line:
                    known -= whole(content[body:line])
                return (sum(piece(content[a:b]) for a, b in pairwise([0, *heads]))
                        + whole(content[start:cut]) + known + whole(content[body:]))
    return sum(piece(part) if keyed else whole(part)
               for part, keyed in content_parts(content, heads, tails))


# `tokenize_all` cuts a group of contents of about this many bytes, then tokenizes its parts.
GROUP_BYTES = 4 * 1024 * 1024


def tokenize_all(encoding: Any, contents: list[bytes], pieces: dict[bytes, int],
                 chunk_bytes: int = 1024 * 1024,
                 learned: dict[bytes, int] | None = None) -> list[int]:
    """`tokenize` of each content, in order: the same counts, and the pieces `tokenize` cuts
    added to `pieces` and `learned` (a preview, counted after its group, may find more of its
    pieces known); for many contents at once (a cold session's own, in one process).

    A group of contents (GROUP_BYTES) is cut and its pieces looked up first, then the
    tokenizer counts every part no lookup knew, one call after another, then the counts are
    summed. The tokenizer's tables and the cutting's code each stay in the processor's caches
    for the whole stretch instead of evicting each other at every piece. On the 2,000-call cold
    replay in one process (interleaved pairs, issue 31): the work beyond the tokenizer's own
    0.71 → 0.63 s (medians of four), the counting beyond a warm replay 1.13 → 1.08 times the
    serial tokenizing of the raw contents (of six). A preview of a content (its marker found)
    is left to `tokenize` after its group, when the group's pieces are known. The texts of a
    group are held together: a few MB."""
    out = [0] * len(contents)
    start = 0
    while start < len(contents):
        end, size = start + 1, len(contents[start])
        while end < len(contents) and size < GROUP_BYTES:
            size += len(contents[end])
            end += 1
        _tokenize_group(encoding, contents, range(start, end), out, pieces, chunk_bytes,
                        learned)
        start = end
    return out


def _tokenize_group(encoding: Any, contents: list[bytes], group: range, out: list[int],
                    pieces: dict[bytes, int], chunk_bytes: int,
                    learned: dict[bytes, int] | None) -> None:
    sha256 = hashlib.sha256
    known = pieces.get
    texts: list[str] = []  # what the tokenizer is to count, in order
    waiting: dict[bytes, int] = {}  # a piece's digest -> its text's index
    sums: list[tuple[int, int, list[int]]] = []  # content index, known counts, text indices
    previews: list[int] = []
    for k in group:
        content = contents[k]
        heads, tails, previewed = preview_cuts(content)
        if previewed:
            previews.append(k)
            continue
        base, refs = 0, []
        for part, keyed in content_parts(content, heads, tails):
            if keyed:
                digest = sha256(part).digest()
                count = known(digest)
                if count is not None:
                    base += count
                    continue
                at = waiting.get(digest)
                if at is None:
                    at = waiting[digest] = len(texts)
                    texts.append(part.decode("utf-8", "replace"))
                refs.append(at)
            else:
                for chunk in exact_chunks(part, chunk_bytes):  # (a short part: itself)
                    refs.append(len(texts))
                    texts.append(chunk.decode("utf-8", "replace"))
        sums.append((k, base, refs))
    counter = text_counter(encoding)
    counts = [counter(text) for text in texts]
    for digest, at in waiting.items():
        pieces[digest] = counts[at]
        if learned is not None:
            learned[digest] = counts[at]
    for k, base, refs in sums:
        out[k] = base + sum(counts[at] for at in refs)
    for k in previews:
        out[k] = tokenize(encoding, contents[k], pieces, chunk_bytes, learned)


def content_parts(content: bytes, heads: list[int], tails: list[int]
                  ) -> Iterator[tuple[bytes, bool]]:
    """The parts `tokenize` counts a content in, with its cuts (`piece_cuts`), in order, each
    with whether it is a piece looked up by digest: the head pieces, the middle (False:
    tokenized whole), the tail pieces. A content with no cut is one part."""
    start = 0
    for cut in heads:
        yield content[start:cut], True
        start = cut
    n = len(content)
    yield content[start:tails[0] if tails else n], False
    for first, last in pairwise([*tails, n]):
        yield content[first:last], True
