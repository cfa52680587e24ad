"""Mutated valid files (byte flips, truncations, insertions) import or fail with
`TranscriptError`, never with any other exception."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.importers import TranscriptError, load
from tests.importers.agent_fixtures import FIXTURES as AGENT_FIXTURES

FIXTURES = Path(__file__).parent / "fixtures"
SEEDS = sorted(path for path in FIXTURES.iterdir() if path.is_file())
# The issue-29 agents' fixtures are built in code; their text files are seeds too.
AGENT_SEEDS = [data for build, *_ in AGENT_FIXTURES.values() if not (data := build()).startswith(
    b"PK")]
SEED_BYTES = [path.read_bytes() for path in SEEDS] + AGENT_SEEDS
TEXT_SEEDS = [(path.name, path.read_text(encoding="utf-8")) for path in SEEDS] + [
    (name, data.decode()) for name, (build, *_) in AGENT_FIXTURES.items()
    if name.endswith((".json", ".jsonl")) and not (data := build()).startswith(b"PK")]
# Bytes that matter to JSON structure, UTF-8 and the byte checks.
INTERESTING = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b"\n", b"\x00", b"\xff",
               b"\xc3", b"null", b"1e999", b'"role"', b'"type"', b"[[[[[[", b" "]


@st.composite
def mutated_files(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEED_BYTES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete"]))
        position = draw(st.integers(min_value=0, max_value=max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[position] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif kind == "truncate":
            del data[position:]
        elif kind == "insert":
            data[position:position] = draw(st.sampled_from(INTERESTING))
        elif kind == "delete" and data:
            del data[position : position + draw(st.integers(min_value=1, max_value=40))]
    return bytes(data)


@settings(max_examples=400)
@given(mutated_files())
def test_a_mutated_file_imports_or_fails_with_a_one_line_transcript_error(data):
    assert_imports_or_explains(data)


def assert_imports_or_explains(data: bytes) -> None:
    try:
        result = load(io.BytesIO(data))
    except TranscriptError as error:
        message = str(error)
        assert "\n" not in message
        # The generic safety net in `load` means a shape no importer checked explicitly.
        assert "does not have the structure" not in message, message
        return
    assert result.sessions
    for session in result.sessions:
        for message in session.messages:
            assert isinstance(message.content, bytes)


WRONG_VALUES = [None, 0, "x", [], {}, True, [1], {"type": "text"}, [{"type": "tool_use"}], ""]


def _replace_somewhere(value, draw, depth=0):
    """Replace one value somewhere inside `value` by a value of another JSON type."""
    if not isinstance(value, (dict, list)) or not value:
        return
    keys = list(value) if isinstance(value, dict) else list(range(len(value)))
    key = draw(st.sampled_from(keys))
    child = value[key]
    if depth < 8 and isinstance(child, (dict, list)) and child and draw(st.booleans()):
        _replace_somewhere(child, draw, depth + 1)
    else:
        value[key] = copy.deepcopy(draw(st.sampled_from(WRONG_VALUES)))


@st.composite
def files_with_wrong_shapes(draw) -> bytes:
    """Valid JSON whose structure is wrong somewhere: the "right JSON, wrong shapes" case."""
    name, text = draw(st.sampled_from(TEXT_SEEDS))
    if name.endswith(".jsonl"):
        lines = text.splitlines()
        index = draw(st.integers(min_value=0, max_value=len(lines) - 1))
        record = json.loads(lines[index])
        _replace_somewhere(record, draw)
        lines[index] = json.dumps(record)
        return "\n".join(lines).encode()
    document = json.loads(text)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        _replace_somewhere(document, draw)
    return json.dumps(document).encode()


@settings(max_examples=400)
@given(files_with_wrong_shapes())
def test_right_json_with_wrong_shapes_imports_or_names_the_problem(data):
    assert_imports_or_explains(data)
