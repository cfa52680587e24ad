"""Cold counting's fast paths give exactly the counts of plain tokenization (issue 21):
contents tokenized in pieces (`token_cuts.tokenize`), previews reusing a content's pieces, and
the worker processes of `token_pool`."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline import token_cuts, token_pool
from ctxsim.pipeline.params import CHATCLI_ENV
from ctxsim.pipeline.stages import budget, microcompact, tool_cap
from ctxsim.pipeline.stages.budget import spill_preview
from ctxsim.pipeline.stages.microcompact import preview as microcompact_preview
from ctxsim.pipeline.stages.tool_cap import truncate_for_llm
from ctxsim.pipeline.tokens import TiktokenCounter, get_encoding

ENCODINGS = ("cl100k_base", "o200k_base")
# Letters, digits, spaces and line breaks (where exact cuts are), and what sits next to them
# in real contents: punctuation, tabs, CRs, non-ASCII letters, numerals and marks.
ALPHABET = "aZ09 \n\n\r\t.,:;_-/[]{}\"'é½²٣—中🙂"


def plain(name: str, content: bytes) -> int:
    return len(get_encoding(name).encode_ordinary(content.decode("utf-8", "replace")))


@contextmanager
def small_pieces():
    """Pieces a few bytes long, so short hypothesis texts have head, middle and tail pieces."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_cuts, "PIECE_MIN", 12)
        patch.setattr(token_cuts, "HEAD_PIECE", 5)
        patch.setattr(token_cuts, "HEAD_REGION", 70)
        patch.setattr(token_cuts, "LAST_LINE", 20)
        patch.setattr(token_cuts, "TAIL_PIECE", 7)
        patch.setattr(token_cuts, "TAIL_REGION", 16)
        patch.setattr(token_cuts, "MARK_REACH", 8)
        patch.setattr(token_cuts, "PREVIEW_HEADS", SMALL_HEADS)
        yield


# The stages' preview heads at the scale of `small_pieces`, with markers hypothesis writes too
# (one the start of another's, as the budget's and tool_cap's are).
SMALL_HEADS = (
    token_cuts.PreviewHead(20, 10, b"[.", 26),
    token_cuts.PreviewHead(40, 20, b"\n{", 40),
    token_cuts.PreviewHead(50, None, b"\n{:", 60),
)


texts = st.text(alphabet=ALPHABET, max_size=160)


@settings(max_examples=300, deadline=None)
@given(texts, st.binary(max_size=3), st.sampled_from(ENCODINGS))
def test_a_content_in_pieces_counts_as_a_whole(text, junk, name):
    content = text.encode("utf-8") + junk  # junk: bytes that are not UTF-8 at all
    with small_pieces():
        heads, tails = token_cuts.piece_cuts(content)
        cuts = heads + tails
        assert cuts == sorted(set(cuts)) and all(0 < cut < len(content) for cut in cuts)
        assert token_cuts.tokenize(get_encoding(name), content, {}, chunk_bytes=16) == (
            plain(name, content))


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(0, 200), st.integers(0, 200), texts, st.sampled_from(ENCODINGS))
def test_a_preview_counted_with_its_contents_pieces_is_exact(text, head, tail, marker, name):
    """A head of the content, a marker, a tail of it: what the stages make. Counted after the
    content, with the pieces its count left behind, it still counts as plain tokenization."""
    content = text.encode("utf-8")
    made = content[:head] + marker.encode("utf-8") + content[len(content) - tail:]
    pieces: dict[bytes, int] = {}
    encoding = get_encoding(name)
    with small_pieces():
        assert token_cuts.tokenize(encoding, content, pieces) == plain(name, content)
        assert token_cuts.tokenize(encoding, made, pieces) == plain(name, made)


def long_result(lines: int = 400) -> bytes:
    words = ["alpha", "beta", "gamma", "delta", "error", "value=42", "0x7f3a", "path/to/file.py"]
    return "".join(f"line {i}: {' '.join(words[(i + k) % 8] for k in range(9))}\n"
                   for i in range(lines)).encode()


class Spy:
    """An encoding that records how many bytes it was handed."""

    def __init__(self, name: str):
        self.inner = get_encoding(name)
        self.handed = 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.handed += len(text.encode("utf-8"))
        return self.inner.encode_ordinary(text)


@pytest.mark.parametrize("make", [
    lambda c: spill_preview(c, "/tmp/spill/budget_call_1_7.txt", True),
    lambda c: spill_preview(c, "/tmp/spill/budget_call_1_7.txt", False),
    lambda c: truncate_for_llm(c, 8000),
    lambda c: microcompact_preview(c, 2000, 500) + b"\n[full content recoverable]",
], ids=["spill-documented", "spill-as-implemented", "tool-cap", "microcompact"])
@pytest.mark.parametrize("ending", [b"", b"\n", b'"}', b" ]\n"])
def test_the_stages_previews_tokenize_only_what_is_not_the_contents(make, ending):
    """Each stage's preview is found by its marker and cut where its content was cut before
    the head it keeps (`PREVIEW_HEADS`): what is tokenized again is its marker and the few
    bytes between it and the content's tail piece (and an appended last line), whatever the
    content ends with."""
    counter = TiktokenCounter("cl100k_base")
    content = long_result() + ending
    counter.count(content)
    made = make(content)
    spy = Spy("cl100k_base")
    counter._encoding = spy
    assert counter.count(made) == plain("cl100k_base", made)
    assert token_cuts.preview_cuts(made)[2]
    assert 0 < spy.handed < 250  # of previews of 2,500 to 6,000 bytes


def test_the_preview_heads_are_the_stages_defaults():
    """`PREVIEW_HEADS` restates the stages' head lengths (the counter cannot import them); a
    stage whose default changes must change it too, or its previews stop sharing pieces."""
    env = {var.key: var.default for var in CHATCLI_ENV}
    mc_head, mc_tail = env["mc_truncate_head_chars"], env["mc_truncate_tail_chars"]
    microcompact_head, spill_head, cap_head = token_cuts.PREVIEW_HEADS
    assert (microcompact_head.length, microcompact_head.snap_after) == (mc_head, mc_head // 2)
    assert microcompact_head.shortest == mc_head + mc_tail + microcompact.PREVIEW_GUARD
    assert (spill_head.length, spill_head.snap_after) == (budget.PREVIEW_HEAD,
                                                          budget.PREVIEW_HEAD // 2)
    assert cap_head.length == tool_cap.PREVIEW and cap_head.snap_after is None
    assert cap_head.shortest == tool_cap.PREVIEW + tool_cap.SUFFIX


def test_counting_many_at_once_records_what_count_would(monkeypatch):
    monkeypatch.setenv(token_pool.PROCESSES_ENV, "1")
    contents = [long_result(n) for n in (5, 50, 120)] + [b"", b"short", long_result(50)]
    one, many = TiktokenCounter("cl100k_base"), TiktokenCounter("cl100k_base")
    with one.recording() as by_count:
        expected = [one.count(c) for c in contents]
    with many.recording() as by_many:
        many.count_many(contents)
    assert [many.cached(c) for c in contents] == expected
    assert by_many == by_count


@settings(max_examples=200, deadline=None)
@given(st.lists(texts, min_size=1, max_size=6), st.sampled_from(SMALL_HEADS), texts,
       st.integers(1, 120), st.sampled_from(ENCODINGS))
def test_many_contents_tokenized_together_count_as_each_alone(found, shape, rest, group,
                                                              name):
    """`tokenize_all`, in groups of `group` bytes: the counts of plain tokenization, for the
    contents, repeats of them and previews of them the stages' way (left to `tokenize` after
    their group); every piece it adds is a piece's count and is also learned."""
    contents = [t.encode("utf-8") for t in found]
    contents += [contents[0], contents[-1][:shape.end(contents[-1])] + shape.marker
                 + rest.encode() + contents[-1][-20:]]
    encoding = get_encoding(name)
    pieces: dict[bytes, int] = {}
    learned: dict[bytes, int] = {}
    alone: dict[bytes, int] = {}
    with small_pieces(), pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_cuts, "GROUP_BYTES", group)
        counted = token_cuts.tokenize_all(encoding, contents, pieces, 16, learned)
        assert counted == [plain(name, c) for c in contents]
        assert counted == [token_cuts.tokenize(encoding, c, alone, 16) for c in contents]
    assert learned == pieces
    assert all(alone[digest] == tokens for digest, tokens in pieces.items()
               if digest in alone)


def test_many_long_contents_tokenized_together_add_the_pieces_each_would():
    contents = [long_result(n) for n in (30, 80, 80, 200)] + [b"short", long_result(5000)]
    encoding = get_encoding("cl100k_base")
    together: dict[bytes, int] = {}
    alone: dict[bytes, int] = {}
    counted = token_cuts.tokenize_all(encoding, contents, together, 64 * 1024)
    assert counted == [token_cuts.tokenize(encoding, c, alone, 64 * 1024) for c in contents]
    assert together == alone and len(together) > len(contents)


@pytest.mark.parametrize("value, expected", [("1", 1), ("0", 0), ("3", 3), ("x", None)])
def test_the_env_var_sets_the_worker_processes(monkeypatch, value, expected):
    monkeypatch.setenv(token_pool.PROCESSES_ENV, value)
    cpus = os.process_cpu_count() or 1
    assert token_pool.processes() == (cpus if expected is None else expected)


def test_jobs_split_every_content_once_into_balanced_jobs():
    sizes = [50, 1, 30, 30, 7, 7, 7, 90]
    jobs = token_pool.jobs(sizes, 3)
    assert sorted(i for job in jobs for i in job) == list(range(len(sizes)))
    loads = sorted(sum(sizes[i] for i in job) for job in jobs)
    assert loads[-1] - loads[0] <= max(sizes)


def test_worker_processes_count_exactly_as_this_one(monkeypatch):
    """Deterministic and identical: the workers' counts and pieces, in the contents' order,
    equal the serial counter's (unicode, digits, invalid UTF-8 and a chunked content too)."""
    monkeypatch.setenv(token_pool.PROCESSES_ENV, "2")
    contents = [long_result(n) for n in range(1, 60, 7)]
    contents += ["naïve café 中文 🙂 42\n".encode() * 300, b"\xff\xfe broken \x80" * 200,
                 long_result(3000)]
    try:
        counted = token_pool.count_all("cl100k_base", contents, 4096, min_bytes=0)
        assert counted is not None
        assert [tokens for tokens, _ in counted] == [plain("cl100k_base", c) for c in contents]
        again = token_pool.count_all("cl100k_base", list(reversed(contents)), 4096,
                                     min_bytes=0)
        assert again == list(reversed(counted))

        serial = TiktokenCounter("cl100k_base")
        expected = [serial.count(c) for c in contents]
        pooled = TiktokenCounter("cl100k_base")
        pooled.CHUNK_BYTES = serial.CHUNK_BYTES
        monkeypatch.setattr(token_pool, "MIN_BYTES", 0)
        pooled.count_many(contents)
        assert [pooled.cached(c) for c in contents] == expected
        assert pooled._by_digest == serial._by_digest  # the workers' pieces came back
    finally:
        token_pool.shutdown()


def test_few_or_small_contents_stay_in_this_process(monkeypatch):
    monkeypatch.setenv(token_pool.PROCESSES_ENV, "2")
    assert token_pool.count_all("cl100k_base", [b"small"], 4096) is None
    monkeypatch.setenv(token_pool.PROCESSES_ENV, "1")
    assert token_pool.count_all("cl100k_base", [long_result()], 4096, min_bytes=0) is None


def test_a_failing_pool_leaves_the_counting_to_this_process(monkeypatch):
    class Stopped:
        def submit(self, *args):
            raise RuntimeError("cannot schedule new futures after shutdown")

        def shutdown(self, **kwargs):
            pass

    monkeypatch.setenv(token_pool.PROCESSES_ENV, "2")
    monkeypatch.setattr(token_pool, "_executor", lambda size: Stopped())
    assert token_pool.count_all("cl100k_base", [long_result()], 4096, min_bytes=0) is None
    counter = TiktokenCounter("cl100k_base")
    monkeypatch.setattr(token_pool, "MIN_BYTES", 0)
    counter.count_many([long_result()])
    assert counter.cached(long_result()) == plain("cl100k_base", long_result())


def test_the_pool_stops_after_its_idle_time(monkeypatch):
    monkeypatch.setenv(token_pool.PROCESSES_ENV, "2")
    monkeypatch.setattr(token_pool, "IDLE_SECONDS", 0.2)
    try:
        assert token_pool.count_all("cl100k_base", [long_result()], 4096, min_bytes=0)
        assert token_pool._POOL["executor"] is not None
        deadline = time.monotonic() + 10
        while token_pool._POOL["executor"] is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert token_pool._POOL["executor"] is None
    finally:
        token_pool.shutdown()



def test_a_content_counted_by_its_digit_shape_is_known_to_cached():
    """A content whose count came from a sibling of the same digit shape (or a digest another
    process stored) is known without tokenizing: its count can be stored with the session."""
    counter = TiktokenCounter("cl100k_base")
    first = spill_preview(long_result(60), "/tmp/spill/budget_call_1_10.txt", True)
    again = first.replace(b"_10.txt", b"_47.txt")
    counter.count(first)
    assert counter.cached(again) == plain("cl100k_base", again)
    assert counter.cached(b"never counted") is None


SPECIAL_TEXTS = ("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                 "<|endofprompt|>", "<|", "|>")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SPECIAL_TEXTS) | texts, max_size=6), st.sampled_from(ENCODINGS))
def test_counting_from_the_token_buffer_is_encode_ordinary(parts, name):
    """`text_counter` reads the count off tiktoken's token buffer (`encode` with no special
    token allowed): the count of `encode_ordinary`, special-token texts included."""
    text = "".join(parts)
    encoding = get_encoding(name)
    assert token_cuts.text_counter(encoding)(text) == len(encoding.encode_ordinary(text))


def test_the_token_buffer_counts_special_tokens_and_surrogates_as_ordinary_text():
    encoding = get_encoding("cl100k_base")
    count = token_cuts.text_counter(encoding)
    for text in ("<|endoftext|>", "a<|endoftext|>b<|endofprompt|>", "lone \ud800 surrogate"):
        assert count(text) == len(encoding.encode_ordinary(text)) > 0
    spy = Spy("cl100k_base")  # no token buffer: counted through its encode_ordinary
    assert token_cuts.text_counter(spy)("hello world") == 2 and spy.handed == 11


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=60).map(lambda t: t.encode("utf-8")),
       st.integers(0, 70), st.integers(0, 70) | st.none())
def test_next_cut_finds_what_the_look_behind_pattern_finds(content, pos, endpos):
    found = token_cuts._EXACT_CUT.search(content, pos, len(content) if endpos is None
                                         else endpos)
    assert token_cuts.next_cut(content, pos, endpos) == (-1 if found is None
                                                          else found.start())


@settings(max_examples=300, deadline=None)
@given(texts, st.sampled_from("aZ09"), texts, st.sampled_from(ENCODINGS))
def test_a_cut_between_a_letter_or_digit_and_a_line_break_is_exact(left, last, right, name):
    """What `tokenize` relies on before a content's last line."""
    before, after = (left + last).encode(), ("\n" + right).encode()
    assert plain(name, before) + plain(name, after) == plain(name, before + after)


ASCII_EDGES = [chr(b) for b in range(128) if not chr(b).isalnum() and chr(b) != "'"]


@settings(max_examples=500, deadline=None)
@given(texts, st.sampled_from("aZ09sStT"), st.sampled_from(ASCII_EDGES), texts,
       st.sampled_from(ENCODINGS))
def test_a_cut_after_a_letter_or_digit_before_another_ascii_byte_is_exact(left, last, first,
                                                                          right, name):
    """What the head marks and the last-line cut rely on (`_LAST_EDGE`): after an ASCII letter
    or digit, before an ASCII byte that is neither nor an apostrophe (a contraction's)."""
    before, after = (left + last).encode(), (first + right).encode()
    assert plain(name, before) + plain(name, after) == plain(name, before + after)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=ALPHABET, max_size=80).map(lambda t: t.encode("utf-8")),
       st.integers(0, 90), st.integers(0, 90))
def test_edge_before_finds_the_last_edge_within_reach(content, end, start):
    end = min(end, len(content))
    edges = [q for q in range(max(start, end - token_cuts.MARK_REACH) + 1, end)
             if chr(content[q - 1]).isascii() and chr(content[q - 1]).isalnum()
             and chr(content[q]) in ASCII_EDGES]
    assert token_cuts.edge_before(content, end, start) == (edges[-1] if edges else -1)


@settings(max_examples=300, deadline=None)
@given(texts, st.sampled_from(SMALL_HEADS), st.integers(0, 60), texts,
       st.text(alphabet=ALPHABET.replace("\n", ""), max_size=25) | st.none(),
       st.sampled_from(ENCODINGS))
def test_a_stages_preview_counted_with_its_contents_pieces_is_exact(text, shape, tail, rest,
                                                                    line, name):
    """A preview as the stages make it: the head `shape` keeps, its marker, the content's
    tail, and maybe a line of its own (microcompact's recall line)."""
    content = text.encode("utf-8")
    made = (content[:shape.end(content)] + shape.marker + rest.encode()
            + content[len(content) - tail:] + (b"" if line is None else b"\n" + line.encode()))
    pieces: dict[bytes, int] = {}
    encoding = get_encoding(name)
    with small_pieces():
        assert token_cuts.tokenize(encoding, content, pieces) == plain(name, content)
        assert token_cuts.tokenize(encoding, made, pieces) == plain(name, made)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(0, 200), st.integers(0, 200), texts,
       st.text(alphabet=ALPHABET.replace("\n", ""), max_size=25), st.sampled_from(ENCODINGS))
def test_a_preview_with_a_last_line_appended_is_exact(text, head, tail, marker, line, name):
    """Microcompact's shape: head, marker, the content's tail, then a line of its own."""
    content = text.encode("utf-8")
    made = (content[:head] + marker.encode() + content[len(content) - tail:] + b"\n"
            + line.encode())
    pieces: dict[bytes, int] = {}
    encoding = get_encoding(name)
    with small_pieces():
        assert token_cuts.tokenize(encoding, content, pieces) == plain(name, content)
        assert token_cuts.tokenize(encoding, made, pieces) == plain(name, made)


def test_the_tail_piece_before_an_appended_last_line_is_not_tokenized_again():
    counter = TiktokenCounter("cl100k_base")
    content = long_result() + b"the end"
    counter.count(content)
    made = microcompact_preview(content, 2000, 500) + b"\n[full content recoverable]"
    spy = Spy("cl100k_base")
    counter._encoding = spy
    assert counter.count(made) == plain("cl100k_base", made)
    tail = len(content) - token_cuts.piece_cuts(content)[1][-1]  # the content's last piece
    last_head = token_cuts.piece_cuts(made)[0][-1]
    # Tokenized: from the last head piece to the tail piece, and the appended line alone.
    assert spy.handed == len(made) - last_head - tail


def test_contents_of_one_length_share_a_digit_shape_count_without_digests_for_the_rest():
    """Digests are taken only for lengths two contents have: a content with a length of its
    own is tokenized without one, and gets it once a content of its length comes."""
    counter = TiktokenCounter("cl100k_base")
    first = b"spill preview /tmp/budget_call_1_10.txt"
    counter.count_many([first, b"another, longer content"])
    assert counter._by_digest == {}
    sibling = first.replace(b"_10.txt", b"_47.txt")
    counter._encoding = Spy("cl100k_base")
    assert counter.count(sibling) == plain("cl100k_base", sibling)
    assert counter._encoding.handed == 0  # its digit shape's count was known
    with counter.recording() as fresh:  # a recording takes the digest of what it tokenizes
        counter.count(b"x" * 7)
    assert len(fresh) == 1


def test_a_content_waiting_for_its_digest_gets_it_from_a_batch_of_its_length():
    counter = TiktokenCounter("cl100k_base")
    first = b"result of run 1234: ok"
    counter.count(first)  # its length is new: no digest yet
    siblings = [first.replace(b"1234", b"9876"), first.replace(b"1234", b"abcd")]
    spy = Spy("cl100k_base")
    counter._encoding = spy
    counter.count_many(siblings)  # two of that length: both digested, and the waiting one
    assert [counter.cached(c) for c in siblings] == [plain("cl100k_base", c) for c in siblings]
    assert spy.handed == len(siblings[1])  # the digit sibling was known by its shape


def test_pieces_one_process_recorded_count_another_ones_previews():
    """Issue 31: a replay records the head and tail pieces of the session's long contents it
    counts ahead (`recording(pieces=True)`, stored with the session's counts), not those of
    the previews it makes; another process primed with them (as `load_counts` primes it from
    the stored rows) counts a new spill preview of such a content tokenizing only the bytes
    around its marker. Without the pieces it tokenizes all of the preview."""
    content = long_result()
    made = spill_preview(content, "/tmp/spill/budget_call_1_7.txt", True)
    recorded, contents_only = TiktokenCounter("cl100k_base"), TiktokenCounter("cl100k_base")
    with recorded.recording(pieces=True) as with_pieces:
        recorded.count_many([content])
        recorded.count(made + b"\n")  # a preview: its digest, none of its pieces
    with contents_only.recording() as without:
        contents_only.count_many([content])
        contents_only.count(made + b"\n")
    assert set(without) < set(with_pieces)  # the digests, then the content's pieces
    heads, tails = token_cuts.piece_cuts(content)
    assert len(with_pieces) == len(without) + len(heads) + len(tails)
    # The preview keeps the content's last ~1,000 bytes: both its tail pieces are the content's.
    shift = len(content) - len(made)
    assert len(tails) == 2 and token_cuts.piece_cuts(made)[1] == [t - shift for t in tails]

    handed = {}
    for name, counts in (("pieces", with_pieces), ("content", without)):
        other = TiktokenCounter("cl100k_base")
        other.prime_digests(counts.items())
        other._encoding = spy = Spy("cl100k_base")
        assert other.count(made) == plain("cl100k_base", made)
        handed[name] = spy.handed
    assert handed["content"] == len(made)
    assert 0 < handed["pieces"] < len(made) / 3
