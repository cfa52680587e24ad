"""Issue 20 ("Holds under hostile use"): importers do bounded work on hostile files."""

from __future__ import annotations

import io
import json

from ctxsim.importers import claude_code_tree, load


class _CountingUuid(str):
    """A uuid that counts the equality tests made on it (a list scan makes one per item)."""

    compared = 0

    def __eq__(self, other):
        _CountingUuid.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def _sidechain_line(i: int, parent: str | None) -> dict:
    role = "user" if i % 2 == 0 else "assistant"
    message = ({"role": "user", "content": f"step {i}"} if role == "user" else
               {"id": f"msg_{i}", "role": "assistant", "content": [{"type": "text",
                                                                   "text": f"reply {i}"}]})
    return {"parentUuid": parent, "isSidechain": True, "type": role, "uuid": f"u{i}",
            "sessionId": "s", "agentId": "agent", "message": message}


def test_finding_sidechain_roots_of_a_reversed_chain_is_linear():
    """issue 20 item 8: `root_of` checked `in path` on a list, so a chain written leaf first
    cost a scan of the path per step (64k lines: 23 s instead of 0.35 s)."""
    n = 2000
    uuids = [_CountingUuid(f"u{i}") for i in range(n)]
    nodes = {}
    for i in range(n):
        node = claude_code_tree.Node(i + 1, uuids[i], {"isSidechain": True,
                                                  "parentUuid": uuids[i - 1] if i else None})
        nodes[uuids[i]] = node
    roots: dict[str, str] = {}
    _CountingUuid.compared = 0
    found = {claude_code_tree.root_of(nodes[u], nodes, roots) for u in reversed(uuids)}
    assert found == {"u0"}
    assert _CountingUuid.compared <= 4 * n  # a list scan makes ~n²/2 = 2,000,000


def test_a_sidechain_written_leaf_first_imports_as_in_file_order():
    """issue 20 item 8: a chain written backwards, its leaf last (the root walk from the first
    line then crosses the whole chain), still gives the session of the file-order chain."""
    lines = [_sidechain_line(i, f"u{i - 1}" if i else None) for i in range(40)]

    def sessions(records):
        data = "".join(json.dumps(r) + "\n" for r in records).encode()
        return [(s.key, [(m.role, m.content) for m in s.messages])
                for s in load(io.BytesIO(data), "claude-code").sessions]

    natural = sessions(lines)
    assert natural and len(natural[0][1]) == 40
    assert sessions([*reversed(lines[:-1]), lines[-1]]) == natural


HUGE = "9" * 5000  # more digits than Python converts (sys.get_int_max_str_digits: 4300)


def test_a_jsonl_transcript_with_a_huge_integer_is_one_error_naming_the_line():
    """issue 20 item 14: `_parse_line` let json's ValueError escape (500 on upload)."""
    import pytest

    from ctxsim.importers import TranscriptError

    good = _sidechain_line(0, None)
    bad = {**_sidechain_line(1, "u0"), "costUSD": 0}
    text = json.dumps(good) + "\n" + json.dumps(bad).replace('"costUSD": 0',
                                                             '"costUSD": ' + HUGE) + "\n"
    with pytest.raises(TranscriptError, match="line 2.*a number has more than 4300 digits"):
        load(io.BytesIO(text.encode()))


def test_a_json_transcript_with_a_huge_integer_is_one_error_naming_the_line():
    """issue 20 item 14: the whole-file JSON formats parse the same way."""
    import pytest

    from ctxsim.importers import TranscriptError

    text = '{"model": "gpt-4o",\n "max_tokens": ' + HUGE + ',\n "messages": []}'
    with pytest.raises(TranscriptError, match="line 2.*a number has more than 4300 digits"):
        load(io.BytesIO(text.encode()), "openai-chat")
