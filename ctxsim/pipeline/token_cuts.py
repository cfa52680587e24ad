"""Where a content may be cut without changing its token count, and the tokenizing of one
content in pieces (SPEC §5, issue 21). Pure functions of the bytes; `tokens` builds its counter
on them, and the counting worker processes (`token_pool`) run the same `tokenize`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
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


# Pieces (issue 21): a long content is tokenized as a few head pieces of about HEAD_PIECE bytes
# (up to HEAD_REGION), a middle, and two tail pieces from the first exact cuts at or after
# TAIL_REGION and TAIL_PIECE bytes before its end, all cut at `_EXACT_CUT` points of the content
# itself, so the sum is its count whatever the pieces are. The head and tail pieces' counts are
# kept by digest: the previews and stubs the stages make (a head of the content, a marker, its
# tail) cut the same pieces where they share the content's bytes, so only the part around the
# marker is tokenized. Each piece costs a search, a digest and a call of the tokenizer (~3 µs):
# head pieces reach ~4 KB, which covers microcompact's previews (heads of 1-2 KB) and most of the
# spill preview's 4 KB head; past that one more head piece reaches ~4.6 KB (tool_cap keeps a
# 5,000-byte head). Head pieces to ~4 KB rather than ~2.3 KB measured alike on the 2,000-call cold
# replay (2.31-2.36 s against 2.32-2.39 s), and once a web process knows the pieces another
# process counted (`recording`), a 200-call session's first lower spill cap costs 157 ms of CPU
# there instead of 188 (issue 31).
PIECE_MIN = 2048
HEAD_PIECE = 768
HEAD_REGION = 4200
FAR_HEAD = 4608
TAIL_PIECE = 384
# A second tail piece before the last one, from the first exact cut at or after TAIL_REGION
# bytes before the end; head pieces end before it. A spill preview keeps about the last
# 1,000 bytes of its content (from the line after), so both of its tail pieces are the
# content's and only the stretch around its marker is tokenized: a new spill cap of 6,000
# bytes on ten 200-call sessions tokenized 1.6 MB instead of 3.6, and each first replay of it
# in a web process took 129 ms of CPU instead of 166 (issue 31).
TAIL_REGION = 896


def piece_cuts(content: bytes) -> tuple[list[int], list[int]]:
    """The head cuts of a long content and where its tail pieces start (ascending; none: no
    tail piece). A content shorter than PIECE_MIN has none: it is tokenized whole."""
    n = len(content)
    if n < PIECE_MIN:
        return [], []
    heads: list[int] = []
    start = 0
    end = n - TAIL_REGION  # where the tail pieces' region begins: head pieces end before it
    while start + HEAD_PIECE <= HEAD_REGION:
        start = next_cut(content, start + HEAD_PIECE, end)
        if start < 0:
            start = heads[-1] if heads else 0
            break
        heads.append(start)
    far = next_cut(content, max(FAR_HEAD, start + HEAD_PIECE), end)
    if far > 0:
        heads.append(far)
        start = far
    tails: list[int] = []
    for back in (TAIL_REGION, TAIL_PIECE):
        cut = next_cut(content, max(n - back, start + 1))
        if cut > 0 and (not tails or cut > tails[-1]):
            tails.append(cut)
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


# A last line appended to a content's tail (microcompact's recall line "[full content
# recoverable via @recall <<ccr:…>>]") would hide the tail piece it shares. So a long content
# whose last line break follows an ASCII letter or digit and starts a line of at most LAST_LINE
# bytes is also tried as: the tail piece that ends at that line break, searched for as the
# content would be searched were it to end there (a hit means its bytes are a known tail
# piece), then the last line on its own. Cutting before that "\n" is exact: no piece of either
# encoding's split runs from a letter or digit into a line break (letter pieces end in letters
# or a contraction, digit pieces are digits, punctuation and space pieces hold neither), and
# the "\n" starts the same pieces with or without what comes before it (tests check it).
LAST_LINE = 256
_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")


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

    heads, tails = piece_cuts(content)
    n = len(content)
    if not heads and not tails:
        return whole(content)
    total, start = 0, 0
    for cut in heads:
        total += piece(content[start:cut])
        start = cut
    line = content.rfind(b"\n", start + 1)
    if 0 < n - line <= LAST_LINE and content[line - 1] in _ALNUM:
        cut = next_cut(content, line - TAIL_PIECE, line)
        if cut > start:
            known = pieces.get(sha256(content[cut:line]).digest())
            if known is not None:
                return total + known + whole(content[start:cut]) + whole(content[line:])
    total += whole(content[start:tails[0] if tails else n])
    for first, last in pairwise([*tails, n]):
        total += piece(content[first:last])
    return total
