"""Issue 20 ("Holds under hostile use"): bounded work in the pure engine."""

from __future__ import annotations

import pytest

from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.replay import Replay, replay
from ctxsim.pipeline.stages import pairing
from tests.pipeline.helpers import assistant, tool, user


def _scanned_positions(monkeypatch, messages) -> tuple[int, list]:
    """Replay `messages` with the default profile; return how many positions the pairing
    prepass scanned over the whole replay (from its resume point to the end), and the calls."""
    scanned = 0
    inner = pairing.needs_repair

    def counting(history, ctx=None):
        nonlocal scanned
        scanned += len(history) - pairing._resume_point(history, ctx)
        return inner(history, ctx)

    monkeypatch.setattr(pairing, "needs_repair", counting)
    calls = list(replay(messages).calls())
    return scanned, calls


@pytest.mark.parametrize("with_tools", [False, True])
def test_the_pairing_prepass_scans_each_position_a_bounded_number_of_times(
        monkeypatch, with_tools):
    """issue 20 item 7: with no tool calls the memo's resume point stayed 0, so every call
    rescanned the whole history (5k calls 5.7 s, 20k 90.6 s)."""
    n = 400
    messages = []
    for i in range(n):
        messages.append(user(f"question {i}"))
        if with_tools and i % 7 == 0:
            messages += [assistant(f"c{i}"), tool(f"c{i}", f"result {i}")]
        messages.append(assistant(text=f"answer {i}"))
    scanned, calls = _scanned_positions(monkeypatch, messages)
    assert len(calls) >= n
    # Linear: a few positions per call, not the ~n²/2 = 80,000+ of a rescan from 0.
    assert scanned <= 4 * len(messages)


def test_the_resumed_prepass_still_finds_a_broken_pair_after_plain_messages(monkeypatch):
    """issue 20 item 7: resuming at a plain message must not hide a later orphan result."""
    messages = [user("a"), assistant(text="b"), user("c"), assistant(text="d"),
                tool("ghost", "orphan"), assistant(text="e")]
    _, calls = _scanned_positions(monkeypatch, messages)
    with_memo = [c.sent for c in calls]
    plain = [c.sent for c in Replay(messages, resolve("chatcli", None), use_memos=False).calls()]
    assert with_memo == plain
    assert all(m.role != "tool" for m in calls[-1].sent)


HUGE = "9" * 5000  # more digits than Python converts (sys.get_int_max_str_digits: 4300)


def test_an_env_knob_of_thousands_of_digits_is_go_overflow_not_a_crash():
    """issue 20 item 14: `go_atoi` called int() on 5,000 digits and raised ValueError."""
    from ctxsim.pipeline.params import go_atoi

    assert go_atoi(HUGE) is None
    assert go_atoi("-" + HUGE) is None
    assert go_atoi("0" * 5000 + "42") == 42  # Go's Atoi reads leading zeros


@pytest.mark.parametrize("family", ["aivax", "anthropic"])
def test_a_pasted_profile_with_a_huge_integer_is_one_clear_error(family):
    """issue 20 item 14: `_load_object` let json's ValueError escape (500 on the page)."""
    from ctxsim.pipeline.export import IMPORTERS
    from ctxsim.pipeline.params import ParamError

    with pytest.raises(ParamError, match="line 1 column 24: a number has more than 4300 digits"):
        IMPORTERS[family]('{"contextMaximumSize": ' + HUGE + "}")


def test_simulate_on_a_scenario_with_a_huge_integer_exits_2_with_one_line(tmp_path):
    """issue 20 item 14 (a guard: the CLI already caught the ValueError): one line, status 2."""
    import io

    from ctxsim.cli import main

    path = tmp_path / "s.json"
    path.write_text('{"config": {"turn_budget_chars": ' + HUGE + '}, "messages": []}')
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path)], out, err) == 2
    assert "4300 digits" in err.getvalue() and err.getvalue().count("\n") == 1


@pytest.mark.parametrize("kind", ["memory", "null"])
def test_sinks_without_a_disk_decide_a_directory_from_its_text_alone(kind, tmp_path):
    """issue 20 item 19: `spill_dir=/etc/passwd/x` said "dir creation failed" and
    `/etc/nonexistent/x` did not: any viewer could probe the server's filesystem."""
    from ctxsim.pipeline.spill import MemorySpillSink, NullSpillSink, SpillError

    planted = tmp_path / "a-file"
    planted.write_text("x")
    sink = MemorySpillSink() if kind == "memory" else NullSpillSink()
    for directory in (f"{planted}/x", "/etc/passwd/x", str(tmp_path / "missing" / "x")):
        sink.ensure_dir(directory)  # what is on this machine's disk changes nothing
    for directory in ("/dev/null/tool-results", "/dev/null", "", "/a\x00b"):
        with pytest.raises(SpillError):
            sink.ensure_dir(directory)  # impossible on every Linux machine


def test_the_cli_directory_sink_still_refuses_a_path_through_a_file(tmp_path):
    """issue 20 item 19: the CLI's own directory sink may (and must) look at the disk."""
    from ctxsim.pipeline.spill import DirectorySpillSink, SpillError

    planted = tmp_path / "a-file"
    planted.write_text("x")
    with pytest.raises(SpillError):
        DirectorySpillSink().ensure_dir(f"{planted}/x")


def test_writing_spills_never_follows_a_planted_symlink(tmp_path):
    """issue 20 item 20: `simulate --write-spills DIR` opened the name with O_TRUNC and
    followed a symlink planted there, overwriting its target; the link is now replaced."""
    from ctxsim.pipeline.spill import DirectorySpillSink

    target = tmp_path / "precious.txt"
    target.write_bytes(b"keep me")
    spills = tmp_path / "spills"
    spills.mkdir()
    (spills / "budget_a_1.txt").symlink_to(target)
    DirectorySpillSink(spills).write("/d", "budget_a_1.txt", b"the spill")
    assert target.read_bytes() == b"keep me"
    written = spills / "budget_a_1.txt"
    assert not written.is_symlink() and written.read_bytes() == b"the spill"


def test_a_spill_file_is_complete_or_absent_and_never_rewritten_in_place(tmp_path):
    """issue 20 item 20: written to a temporary name and renamed, so a reader never sees a
    half-written file and an existing file's inode (a hard link elsewhere) is not truncated."""
    from ctxsim.pipeline.spill import DirectorySpillSink

    spills = tmp_path / "spills"
    spills.mkdir()
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(b"keep me")
    (spills / "budget_a_1.txt").hardlink_to(elsewhere)
    sink = DirectorySpillSink(spills)
    sink.write("/d", "budget_a_1.txt", b"new spill")
    assert (spills / "budget_a_1.txt").read_bytes() == b"new spill"
    assert elsewhere.read_bytes() == b"keep me"
    assert sorted(p.name for p in spills.iterdir()) == ["budget_a_1.txt"]
    assert (spills / "budget_a_1.txt").stat().st_mode & 0o777 == 0o600


# --- issue 20 item 6: long contents are tokenized in bounded chunks, with the exact count ----

_TEXT_PIECES = ["\n", "\r\n", " ", "  ", "\t", "a", "Z", "word", "Ünïcödé", "日本語", "́",
                "7", "123456", "'s", "'LL", ".", "/", "//", ".\n/", "!?", "==", "+", "x1",
                "1x", "\u00a0", "😀", "\n\n", " \n", "A b", "c 1"]


@pytest.fixture(params=["cl100k_base", "o200k_base"])
def counter(request):
    from ctxsim.pipeline.tokens import TiktokenCounter

    return TiktokenCounter(request.param)


def _whole_count(counter, content: bytes) -> int:
    return len(counter.encode(content.decode("utf-8", "replace")))


def test_the_chunk_boundaries_never_change_the_count(counter):
    """issue 20 item 6: chunks split only where the pre-tokenizer splits anyway, so the sum
    of the chunks' counts is the count of the whole (hypothesis, with 1-byte chunks so every
    boundary the rule allows is used)."""
    from hypothesis import given
    from hypothesis import strategies as st

    from ctxsim.pipeline.tokens import exact_chunks

    @given(st.lists(st.sampled_from(_TEXT_PIECES) | st.text(max_size=3), max_size=60),
           st.binary(max_size=4))
    def check(pieces, junk):
        content = "".join(pieces).encode("utf-8", "surrogatepass") + junk
        chunks = list(exact_chunks(content, 1))
        assert b"".join(chunks) == content
        total = sum(_whole_count(counter, chunk) for chunk in chunks)
        assert total == _whole_count(counter, content)

    check()


def test_a_50_mb_like_content_is_counted_in_bounded_pieces(counter, monkeypatch):
    """issue 20 item 6: a 50 MB tool result was tokenized in one piece (~55× its size in
    memory); no piece handed to the tokenizer may now exceed a chunk and a line."""
    line = b"Traceback line 1234: error in module_name at 0x7f3a9c value=42 ok\n"
    content = line * (3 * 2**20 // len(line))
    expected = _whole_count(counter, content)
    inner = counter._encoding

    class Longest:  # only `encode_ordinary`: the counter hands every text to it
        longest = 0

        def encode_ordinary(self, text):
            self.longest = max(self.longest, len(text))
            return inner.encode_ordinary(text)

    spy = Longest()
    monkeypatch.setattr(counter, "_encoding", spy)
    assert counter.count(content) == expected
    assert 0 < spy.longest <= counter.CHUNK_BYTES + len(line)


@pytest.mark.parametrize("profile", ["chatcli", "chatcli-aivax", "none", "claude-code",
                                     "anthropic-compact"])
@pytest.mark.parametrize("summary", [False, True])
def test_the_streamed_trace_is_byte_for_byte_the_built_one(profile, summary):
    """issue 20 item 2: `write_trace` writes the trace call by call (dispatch, spills and all)
    and its bytes are exactly `json.dumps(build_trace(...))`."""
    import io
    import json

    from ctxsim.generator import generate_session
    from ctxsim.pipeline.trace import build_trace, write_trace

    session = generate_session(40, seed=9, oversize_every=3)
    expected = json.dumps(build_trace(replay(session.messages, profile), summary=summary),
                          ensure_ascii=False).encode()
    out = io.BytesIO()
    rep = replay(session.messages, profile)
    write_trace(rep, out, summary=summary)
    assert out.getvalue() == expected
    assert rep.spilled_files or profile not in ("chatcli", "chatcli-aivax")
