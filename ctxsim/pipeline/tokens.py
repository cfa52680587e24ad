"""Token estimates (SPEC §5): counters, and the one formula every stage and report uses.

The tiktoken encodings are built offline from the BPE files ctxsim ships, hash-checked
(`encodings.py`).
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from typing import Any, Protocol

from .encodings import BPE_SHA256 as BPE_SHA256  # tests and callers import them here
from .encodings import get_encoding as get_encoding
from .encodings import load_bpe_file as load_bpe_file
from .images import part_tokens
from .messages import Message
from .token_cuts import digit_shape, tokenize, tokenize_all
from .token_cuts import exact_chunks as exact_chunks  # tests and callers import it here


class TokenCounter(Protocol):
    name: str

    def count(self, content: bytes) -> int:
        """Tokens of one content (exact bytes); 0 for empty content."""
        ...


class TiktokenCounter:
    """cl100k_base / o200k_base. Counts are cached by content, as the same contents recur.

    The cache is shared by every replay of the process (a web worker replays many sessions),
    so it is bounded: past `MAX_CACHED_BYTES` (contents, plus `ENTRY_BYTES` per digest and
    piece kept) it forgets the least recently used contents, digests and pieces until a
    quarter of it is free — never everything at once (issue 31: a 16,000-call session's 449 MB
    of contents wiped the whole cache, and the next call view tokenized 82,019 contents again).
    Recency is a second chance (CLOCK): a count looked up is marked used (stored negated, in
    place, so the cache keeps the key object it first got and never a caller's equal copy), and
    eviction moves marked entries to the recent end unmarked instead of dropping them. Counts known
    from elsewhere (the database keeps them per stored content) can be handed in with `prime`,
    and what one replay had to tokenize is collected with `recording`.
    """

    MAX_CACHED_BYTES = 512 * 1024 * 1024
    ENTRY_BYTES = 64  # what a digest or piece entry is taken to cost (a 32-byte key, a slot)
    # The tokenizer holds ~55× the text it is given: a 50 MB tool result took 3.3 GB. Long
    # contents are counted in pieces of about this size (`exact_chunks`: the sum is exact).
    CHUNK_BYTES = 1024 * 1024

    def __init__(self, name: str):
        self.name = name
        self._encoding = get_encoding(name)
        self._cache: dict[bytes, int] = {}
        # By SHA-256 of a content, or of its digit shape when it has one: a shape is looked up
        # by its digest, never kept (shapes of a session's contents were a copy of them all:
        # 82 MB of a 100 MB import's replay, issue 21). The head and tail pieces of long
        # contents (`tokenize`) are here too: each entry is the count of the bytes it is the
        # SHA-256 of, whatever they are part of, so one table serves both (and counts primed
        # from another process's pieces count this process's previews of those contents).
        self._by_digest: dict[bytes, int] = {}
        # A digest is taken only when something could share it: contents (or digit shapes) of
        # equal digests have equal lengths, so a content whose length no known digest has is
        # tokenized without one (a shape and a SHA-256 of every byte: ~0.1 s of a 57 MB
        # session's cold replay). It waits here, by length, until a content of its length
        # comes; counts primed by digest (lengths unknown) or a recording take every digest.
        self._undigested: dict[int, bytes] = {}
        self._digested_lengths: set[int] = set()
        self._primed_digests = False
        # Per thread: the dict `recording` collects into, if a block is open (`pieces` too,
        # when it collects pieces).
        self._recording = threading.local()
        self._cached_bytes = 0

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode_ordinary(text)

    def count(self, content: bytes) -> int:
        if not content:
            return 0
        cached = self._cache.get(content)
        if cached is not None:
            if cached > 0:
                self._cache[content] = -cached  # used: a second chance at eviction
                return cached
            return -cached
        if not self._needs_digest(len(content)):
            cached = self._tokenize(content)
            self._remember(content, cached)
            self._undigested[len(content)] = content
            return cached
        digest = self._digest(content)
        cached = self._by_digest.get(digest)
        if cached is None:
            cached = self._tokenize(content)
            self._learn_digest(digest, cached, len(content))
        self._remember(content, cached)
        return cached

    def _needs_digest(self, length: int) -> bool:
        """Whether a content of this length is to be keyed by digest: always while recording or
        once counts were primed by digest, else when a digest of its length is known or waits
        (which is taken now)."""
        waiting = self._undigested.pop(length, None)
        if waiting is not None:
            known = self._cache.get(waiting)
            if known is not None:  # not recorded: it was tokenized before any recording block
                self._by_digest[self._digest(waiting)] = abs(known)
                self._digested_lengths.add(length)
        return (self._primed_digests or length in self._digested_lengths
                or getattr(self._recording, "counts", None) is not None)

    @staticmethod
    def _digest(content: bytes) -> bytes:
        shape = digit_shape(content)
        return hashlib.sha256(content if shape is None else shape).digest()

    def _learn_digest(self, digest: bytes, tokens: int, length: int) -> None:
        self._by_digest[digest] = tokens
        self._digested_lengths.add(length)
        fresh = getattr(self._recording, "counts", None)
        if fresh is not None:
            fresh[digest] = tokens

    def _tokenize(self, content: bytes, learned: dict[bytes, int] | None = None) -> int:
        return tokenize(self._encoding, content, self._by_digest, self.CHUNK_BYTES, learned)

    def _tokenize_all(self, contents: list[bytes], learned: dict[bytes, int] | None = None
                      ) -> list[int]:
        return tokenize_all(self._encoding, contents, self._by_digest, self.CHUNK_BYTES,
                            learned)

    def count_many(self, contents: Iterable[bytes]) -> None:
        """Count every content not known yet, now: a cold session's distinct contents are
        spread over the machine's cores when there are enough of them (`token_pool`), else
        tokenized here. Afterwards `count` finds each in the cache; the counts are the ones
        `count` would have made (`tokenize`, or here `tokenize_all`, which cuts the same
        pieces), recorded the same way."""
        from . import token_pool

        new = list(dict.fromkeys(c for c in contents if c and c not in self._cache))
        lengths = Counter(map(len, new))
        todo: dict[bytes, bytes | None] = {}  # digest (or the content itself) -> content
        for content in new:
            n = len(content)
            if not self._needs_digest(n) and lengths[n] == 1:  # (settles one waiting first)
                todo[content] = None  # tokenized without a digest, as `count` would
                continue
            digest = self._digest(content)
            known = self._by_digest.get(digest)
            if known is not None:
                self._remember(content, known)
            elif digest not in todo:
                todo[digest] = content
        if not todo:
            return
        items = [key if content is None else content for key, content in todo.items()]
        counted = token_pool.count_all(self.name, items, self.CHUNK_BYTES)
        learned = getattr(self._recording, "pieces", None)
        if counted is None:  # not worth other processes: here, with the counts `count` makes
            counted = [(tokens, []) for tokens in self._tokenize_all(items, learned)]
        for (key, digested), content, (tokens, pieces) in zip(todo.items(), items, counted,
                                                               strict=True):
            for piece_digest, piece_tokens in pieces:
                if piece_digest not in self._by_digest:
                    self._by_digest[piece_digest] = piece_tokens
                    if learned is not None:
                        learned[piece_digest] = piece_tokens
            if digested is not None:
                self._learn_digest(key, tokens, len(content))
            self._remember(content, tokens)
            if digested is None:
                self._undigested[len(content)] = content

    def prime_digests(self, known: Iterable[tuple[bytes, int]]) -> None:
        """Counts by SHA-256 of a content (or of its digit shape), e.g. counted by another
        process for the previews and stubs a replay makes: they are not tokenized again."""
        before = len(self._by_digest)
        self._by_digest.update(known)
        self._primed_digests = self._primed_digests or len(self._by_digest) > before

    @contextmanager
    def recording(self, pieces: bool = False) -> Iterator[dict[bytes, int]]:
        """The counts this thread tokenizes within the block, by digest (of the content or of
        its digit shape), for other processes to prime with; with `pieces`, the head and tail
        pieces of the long contents it counts ahead (`count_many`: a session's own contents)
        too. A preview of such a content, which any process may make next, starts and ends
        with them (~2,300 pieces for a 200-call session's contents, ~184,000 for a
        16,000-call one's); a preview's own pieces hold its marker and serve no other. Per
        thread, so replays of other sessions running at the same time never mix theirs in."""
        outer = (getattr(self._recording, "counts", None),
                 getattr(self._recording, "pieces", None))
        counts: dict[bytes, int] = {}
        self._recording.counts = counts
        self._recording.pieces = counts if pieces else None
        try:
            yield counts
        finally:
            self._recording.counts, self._recording.pieces = outer

    def cached(self, content: bytes) -> int | None:
        """The count if it is already known, without tokenizing."""
        if not content:
            return 0
        known = self._cache.get(content)
        if known is not None:
            if known > 0:
                self._cache[content] = -known
            return abs(known)
        self._needs_digest(len(content))  # one waiting with this length has its digest now
        return self._by_digest.get(self._digest(content))

    def shape_count(self, content: bytes) -> int | None:
        """The count already known for contents of this one's digit shape, if any."""
        shape = digit_shape(content)
        if shape is None:
            return None
        self._needs_digest(len(content))
        return self._by_digest.get(hashlib.sha256(shape).digest())

    def prime(self, known: Iterable[tuple[bytes, int]]) -> None:
        """Take counts computed earlier (e.g. stored with a session) so they are not redone."""
        for content, tokens in known:
            if content and content not in self._cache:
                self._remember(content, tokens)

    def _remember(self, content: bytes, tokens: int) -> None:
        if self.cached_bytes + len(content) > self.MAX_CACHED_BYTES:
            self._evict(len(content))
        self._cache[content] = tokens
        self._cached_bytes += len(content)

    @property
    def cached_bytes(self) -> int:
        """What the cache holds, as the bound counts it."""
        return self._cached_bytes + self.ENTRY_BYTES * len(self._by_digest)

    def _evict(self, incoming: int) -> None:
        """Forget the least recently used entries until a quarter of the budget is free (and
        `incoming` fits): contents from the old end of `_cache` (one used since the last
        eviction goes to the recent end instead, unmarked), and the older half of the digests
        (and pieces) while they hold more than a quarter of it. Each dict is rebuilt in one
        pass, so evicting costs O(1) per entry ever added."""
        budget = self.MAX_CACHED_BYTES
        if self.ENTRY_BYTES * len(self._by_digest) > budget // 4:
            self._by_digest = dict(islice(self._by_digest.items(), len(self._by_digest) // 2,
                                          None))
        target = max(0, budget * 3 // 4 - incoming - self.ENTRY_BYTES * len(self._by_digest))
        excess = self._cached_bytes - target
        if excess <= 0:
            return
        items = iter(self._cache.items())
        head: list[tuple[bytes, int]] = []
        again: list[tuple[bytes, int]] = []  # used since the last eviction: kept, unmarked
        for content, tokens in items:
            if excess <= 0:
                head.append((content, tokens))
                break
            if tokens < 0:
                again.append((content, -tokens))
            else:
                excess -= len(content)
        if excess > 0:  # everything was used since: the oldest of those go after all
            cut = 0
            while excess > 0 and cut < len(again):
                excess -= len(again[cut][0])
                cut += 1
            again = again[cut:]
        self._cache = dict(head)
        self._cache.update(items)
        self._cache.update(again)
        self._cached_bytes = sum(map(len, self._cache))
        # A content waiting for a digest is held here too: let evicted ones go.
        self._undigested = {n: c for n, c in self._undigested.items() if c in self._cache}


class Bytes4Counter:
    """ceil(UTF-8 bytes / 4): the cheap heuristic gateways use."""

    name = "bytes4"

    def count(self, content: bytes) -> int:
        return (len(content) + 3) // 4

    def cached(self, content: bytes) -> int:
        return self.count(content)

    def prime(self, known: Iterable[tuple[bytes, int]]) -> None:
        """Nothing to remember: counting is as cheap as looking up."""

    def prime_digests(self, known: Iterable[tuple[bytes, int]]) -> None:
        """Nothing to remember."""

    def count_many(self, contents: Iterable[bytes]) -> None:
        """Nothing to count ahead."""

    @contextmanager
    def recording(self, pieces: bool = False) -> Iterator[dict[bytes, int]]:
        """Nothing is ever tokenized."""
        yield {}


_COUNTERS: dict[str, TokenCounter] = {}


def get_counter(name: str = "cl100k_base") -> TokenCounter:
    """The shared counter of that name (its cache is shared across replays)."""
    counter = _COUNTERS.get(name)
    if counter is None:
        counter = Bytes4Counter() if name == "bytes4" else TiktokenCounter(name)
        _COUNTERS[name] = counter
    return counter


@contextmanager
def isolated_counters() -> Iterator[None]:
    """Within the block `get_counter` hands out fresh counters (empty caches), as in a new
    process; the shared ones come back after it. For tests and benchmarks that need a cold
    token cache without reaching into this module."""
    global _COUNTERS
    saved, _COUNTERS = _COUNTERS, {}
    try:
        yield
    finally:
        _COUNTERS = saved


# --- SPEC §5: the formula, in exactly one place ----------------------------------------------


def _json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def tokens_by_identity(memo: dict[int, tuple[Message, int]], m: Message,
                       counter: TokenCounter, image_rule: str = "bytes4") -> int:
    """`message_tokens(m)`, measured once per message object: the engine shares unchanged
    messages between calls. `memo` maps id(m) to (m, tokens); holding m keeps its id from
    being reused by another message."""
    hit = memo.get(id(m))
    if hit is not None and hit[0] is m:
        return hit[1]
    value = message_tokens(m, counter, image_rule)
    memo[id(m)] = (m, value)
    return value


def message_tokens(m: Message, counter: TokenCounter, image_rule: str = "bytes4") -> int:
    """3 + content + Σ calls (name + arguments) + tool_call_id + binary parts.

    Binary parts cost ceil(base64/4) (SPEC §5, the AIVAX stages' rule) unless `image_rule`
    names a provider's image rule (SPEC §11, `images.part_tokens`)."""
    c = counter.count
    total = 3 + c(m.content)
    for call in m.tool_calls:
        total += c(call.name.encode("utf-8", "surrogatepass"))
        total += c(call.arguments.encode("utf-8", "surrogatepass"))
    if m.role == "tool" and m.tool_call_id:
        total += c(m.tool_call_id.encode("utf-8", "surrogatepass"))
    # Media counts by original size, as AIVAX measures it before pre-processing.
    for part in m.meta.get("binary_parts", ()) or ():
        if image_rule == "bytes4":
            total += math.ceil(int(part.get("base64_length", 0) or 0) / 4)
        else:
            total += part_tokens(part, image_rule)
    # Thinking costs tokens only once `clear_thinking` has decided it is sent (SPEC-agents
    # §2.5.0.8); a redacted block is "" and costs 0.
    if m.meta.get("thinking_counted"):
        for t in m.meta.get("thinking", ()) or ():
            total += c(t.encode("utf-8", "surrogatepass"))
    return total


def history_tokens(history: Iterable[Message], counter: TokenCounter) -> int:
    return sum(message_tokens(m, counter) for m in history)


def extras_tokens(
    counter: TokenCounter,
    system_instructions: str = "",
    tools: Any = None,
    response_schema: Any = None,
) -> int:
    """Tokens of what the full prompt adds to the conversation (instructions, tools, schema)."""
    total = 0
    if system_instructions:
        total += 3 + counter.count(system_instructions.encode("utf-8", "surrogatepass"))
    if tools:
        total += counter.count(_json_bytes(tools))
    if response_schema:
        total += counter.count(_json_bytes(response_schema))
    return total


def full_prompt_tokens(
    history: Iterable[Message],
    counter: TokenCounter,
    system_instructions: str = "",
    tools: Any = None,
    response_schema: Any = None,
) -> int:
    """Full prompt = gateway instructions + conversation messages + tools + schema (SPEC §5)."""
    return history_tokens(history, counter) + extras_tokens(
        counter, system_instructions, tools, response_schema
    )
