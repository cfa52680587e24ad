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
