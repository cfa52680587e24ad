"""`claude-code-requests` (SPEC §12): Claude Code's recorded request bodies, as an archive.

The fixture folder is hand-made from the documented layout (see its README: no public sample
exists); each test packs it as the user would upload it.
"""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from ctxsim.importers import FORMATS, TranscriptError, detect, load
from ctxsim.importers.claude_code_requests import NAME, archive_bytes
from tests.factories import REQUEST_BODIES, REQUEST_BODIES_SESSION, request_body_files

FOLDER = REQUEST_BODIES
SESSION_ID = REQUEST_BODIES_SESSION
folder_files = request_body_files


def as_zip(**kwargs) -> io.BytesIO:
    return io.BytesIO(archive_bytes(folder_files(**kwargs)))


def as_tar_gz() -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(FOLDER, arcname="provider-bodies")
    buffer.seek(0)
    return buffer


def test_it_is_registered_and_detected_in_both_archive_kinds():
    assert NAME in FORMATS
    assert detect(as_zip()) == NAME
    assert detect(as_tar_gz()) == NAME


@pytest.mark.parametrize("pack", [as_zip, as_tar_gz])
def test_one_session_per_session_id_with_the_subagent_as_a_sidechain(pack):
    result = load(pack())
    assert result.format == NAME
    main, sub = result.sessions
    assert main.key == SESSION_ID and main.parent_key is None
    assert sub.parent_key == SESSION_ID and sub.meta["sidechain"] is True
    # The main chain: its last request's history plus the final answer.
    assert [m.role for m in main.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
        "assistant"]
    assert main.tool_call_count == 3 and main.tool_result_count == 3
    assert main.messages[-1].text.startswith("`parse` requires a `timeout` key")
    assert main.messages[3].is_error is True
    assert sub.messages[-1].text.startswith("parse() is called from")


def test_the_system_prompt_and_tools_are_the_ones_sent():
    main, sub = load(as_zip()).sessions
    system = main.messages[0].text
    assert system.startswith("You are Claude Code") and "Working directory: /repo" in system
    assert [t["name"] for t in main.tools] == ["Bash", "Read", "Task"]
    assert [t["name"] for t in sub.tools] == ["Bash", "Read"]
    assert main.meta["system_prompt_recorded"] is True
    assert main.meta["model"] == "claude-sonnet-4-5"


def test_each_call_keeps_its_recorded_request():
    main, sub = load(as_zip()).sessions
    recorded = main.meta["recorded_requests"]
    assert [r["request_file"].rsplit("/", 1)[1] for r in recorded] == [
        "0001-request.request.json", "0002-request.request.json",
        "0003-request.request.json", "0005-request.request.json"]
    assert [r["messages"] for r in recorded] == [1, 3, 5, 7]
    assert all(r["matches_history"] for r in recorded)
    assert recorded[1]["usage"]["cache_read_input_tokens"] == 3100
    assert len(sub.meta["recorded_requests"]) == 1


def test_a_compacted_request_is_marked_as_not_matching_the_history():
    files = folder_files()
    name = "provider-bodies/0002-request.request.json"
    request = json.loads(files[name])
    request["messages"][2]["content"][0]["content"] = "[Old tool result content cleared]"
    files[name] = json.dumps(request).encode()
    main, _ = load(io.BytesIO(archive_bytes(files))).sessions
    assert [r["matches_history"] for r in main.meta["recorded_requests"]] == [
        True, False, True, True]


def test_without_an_index_the_requests_are_ordered_by_their_history():
    files = folder_files(skip=("index.jsonl",))
    main, sub = load(io.BytesIO(archive_bytes(files))).sessions
    assert main.key == SESSION_ID
    assert [r["messages"] for r in main.meta["recorded_requests"]] == [1, 3, 5, 7]
    # Without the index the responses named apart from their requests are paired by content
    # (each call's answer is in the next request); the last ones, written at the same time
    # (a zip made at once), cannot be told apart: the history ends with the last request, and
    # the session says so.
    assert main.messages[-1].role == "tool"
    assert [bool(r.get("usage")) for r in main.meta["recorded_requests"]] == [
        True, True, True, False]
    assert any("2 response file(s) could not be paired" in w for w in main.warnings)
    assert any("0005-request.request.json: its response is not in the archive" in w
               for w in main.warnings)


def _tar_by_request_id(stray: bool = False) -> io.BytesIO:
    """The folder without its index, each response named by a request id as Claude Code
    names it, written a few seconds after its request (as the files' times show)."""
    buffer = io.BytesIO()
    files = folder_files(prefix="", skip=("index.jsonl",))
    if stray:
        stray_answer = json.loads(files["0001-response.response.json"])
        stray_answer["content"] = [{"type": "text", "text": "an answer no request follows"}]
        files["req_0000stray.response.json"] = json.dumps(stray_answer).encode()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in sorted(files.items()):
            number = int(name[:4]) if name[:4].isdigit() else 9
            if name.endswith(".response.json") and name[:4].isdigit():
                name, when = f"req_011C{number:04d}abcd.response.json", 1000 + 10 * number + 5
            else:
                # The stray one was written before any request: no call can have sent it.
                when = 1001 if name.startswith("req_0000") else 1000 + 10 * number
            info = tarfile.TarInfo(f"bodies/{name}")
            info.size, info.mtime = len(data), when
            archive.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def test_responses_named_by_request_id_are_paired_with_their_requests():
    main, sub = load(_tar_by_request_id()).sessions
    assert main.messages[-1].role == "assistant"  # the last answer is not lost
    assert all(r.get("usage") for r in main.meta["recorded_requests"])
    assert sub.messages[-1].role == "assistant"
    assert not main.warnings and not sub.warnings


def test_a_response_left_unpaired_is_a_warning_naming_it():
    main, _ = load(_tar_by_request_id(stray=True)).sessions
    assert main.messages[-1].role == "assistant"
    assert any("req_0000stray.response.json" in w and "could not be paired" in w
               for w in main.warnings)


@pytest.mark.parametrize(("files", "message"), [
    ({"notes.txt": b"hello"}, "this ZIP archive holds nothing ctxsim reads"),
    ({"d/index.jsonl": b'{"session_id": "s", "request_file": "missing.request.json"}\n'},
     "missing.request.json"),
    ({"d/index.jsonl": b"not json\n", "d/a.request.json": b"{}"}, "index.jsonl: malformed"),
    ({"d/x.request.json": b'{"messages": [}'}, "x.request.json: malformed JSON"),
    ({"d/x.request.json": b'{"model": "m"}'}, "has no `messages` list"),
])
def test_a_bad_archive_is_one_line_naming_the_file(files, message):
    with pytest.raises(TranscriptError, match=message) as caught:
        load(io.BytesIO(archive_bytes(files)))
    assert "\n" not in str(caught.value)


def test_a_plain_gzip_file_is_still_refused_with_its_own_reason():
    import gzip

    with pytest.raises(TranscriptError, match="gzip-compressed"):
        load(io.BytesIO(gzip.compress(b'{"messages": []}')))


def test_an_archive_larger_than_the_limit_inside_is_refused():
    big = {"d/index.jsonl": b'{"session_id": "s", "request_file": "a.request.json"}\n',
           "d/a.request.json": b"{" + b" " * 50_000 + b"}"}
    with pytest.raises(TranscriptError, match="larger than the upload limit"):
        load(io.BytesIO(archive_bytes(big)), max_bytes=10_000)
