"""Every sink refuses what Linux refuses, so previews read the same wherever bytes land."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxsim.pipeline.spill import (
    DirectorySpillSink,
    MemorySpillSink,
    NullSpillSink,
    SpillError,
    clean_join,
)

SINKS = [MemorySpillSink, NullSpillSink, DirectorySpillSink]


def _sink(kind, tmp_path: Path):
    return kind(tmp_path) if kind is DirectorySpillSink else kind()


@pytest.mark.parametrize("kind", SINKS)
def test_a_name_over_255_bytes_fails_in_every_sink(kind, tmp_path) -> None:
    sink = _sink(kind, tmp_path)
    sink.write("/d", "n" * 255, b"ok")
    with pytest.raises(SpillError):
        sink.write("/d", "é" * 128, b"x")  # 256 bytes


@pytest.mark.parametrize("kind", SINKS)
@pytest.mark.parametrize("directory", ["/dev/null/tool-results", "/dev/null", ""])
def test_a_directory_linux_cannot_create_fails_in_every_sink(kind, directory, tmp_path) -> None:
    with pytest.raises(SpillError):
        _sink(kind, tmp_path).ensure_dir(directory)


def test_the_directory_sink_writes_private_files_under_its_root(tmp_path) -> None:
    sink = DirectorySpillSink(tmp_path / "spills")
    sink.ensure_dir("/configured/elsewhere")
    sink.write("/configured/elsewhere", "budget_a_1.txt", b"data")
    path = tmp_path / "spills" / "budget_a_1.txt"
    assert path.read_bytes() == b"data" and path.stat().st_mode & 0o777 == 0o600


def test_paths_are_joined_and_cleaned_like_go_filepath_join() -> None:
    assert clean_join("/tmp/chatcli-tool-results/", "budget_x_1.txt") == (
        "/tmp/chatcli-tool-results/budget_x_1.txt"
    )
    assert clean_join("//a/./b/..", "f") == "/a/f"
    assert clean_join("", "f") == "f"


def test_a_result_spilled_again_at_every_call_holds_its_bytes_once_and_a_replay_is_bounded(
        monkeypatch) -> None:
    """ChatCLI re-spills every result over its cap at every call (n²/12 files over n calls):
    the bytes of one content are one object, and past MAX_SPILLS the replay stops, saying at
    which call and what to change."""
    from ctxsim.generator import generate_session
    from ctxsim.pipeline import spill
    from ctxsim.pipeline.replay import replay

    session = generate_session(60, 0)
    tiny = {"env": {"CHATCLI_TOOL_RESULT_MAX_CHARS": "200"}, "counter": "cl100k_base"}
    rep = replay(session.messages, "chatcli", tiny)
    calls = list(rep.calls())
    records = rep.spilled_files
    assert len(records) > 2 * len({r.content for r in records})  # spilled again and again
    assert len({id(r.content) for r in records}) == len({r.content for r in records})
    monkeypatch.setattr(spill, "MAX_SPILLS", len(records) // 2)
    with pytest.raises(spill.TooManySpills) as stopped:
        list(replay(session.messages, "chatcli", tiny).calls())
    message = str(stopped.value)
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS" in message and "stopped at call" in message
    at = int(message.split("stopped at call ")[1].split(":")[0])
    assert 1 < at < len(calls)
