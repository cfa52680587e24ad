"""The engine against a naive replay written from the behaviour file alone (`naive_chatcli`),
on random scenarios: every report, history, dispatch record and spilled file must agree.

The engine skips work (memos, groups under both limits, candidates that can no longer change);
the naive replay redoes everything at every call, so a shortcut that changes a result shows up.
"""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxsim.cli import main

from . import naive_chatcli

IDS = ["a", "b", "c", "x/y", "", "L" * 250]
NAMES = ["read_file", "@read", "web_fetch", "run_command"]
SIZES = [0, 5, 2999, 3000, 3500, 5200, 5201, 7000, 20001, 24000, 30001]
ENVS = [
    {},
    {"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "30000"},
    {"CHATCLI_TOOL_RESULT_MAX_CHARS": "4500", "CHATCLI_TOOL_RESULT_BUDGET_CHARS": "9000"},
    {"CHATCLI_MICROCOMPACT_HEAD_CHARS": "2900", "CHATCLI_MICROCOMPACT_TAIL_CHARS": "+700",
     "CHATCLI_MICROCOMPACT_MIN_CONTENT": "100"},
    {"CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "1", "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "2",
     "CHATCLI_MICROCOMPACT_MIN_CONTENT": "0"},
    {"CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "1", "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "3"},
    {"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "6000"},
    {"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "10400"},
    {"CHATCLI_TOOL_RESULT_MAX_CHARS": "1", "CHATCLI_TOOL_RESULT_BUDGET_CHARS": "1"},
]


def _go_text(data: bytes) -> str:
    """Go's JSON rendering of bytes: one U+FFFD per byte that does not start a valid rune."""
    out, i = [], 0
    while i < len(data):
        for width in (1, 2, 3, 4):
            try:
                out.append(data[i:i + width].decode("utf-8"))
                i += width
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)


def _render(m: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m["role"], "content": _go_text(m["content"])}
    try:
        m["content"].decode("utf-8")
    except UnicodeDecodeError:
        out["content_b64"] = base64.b64encode(m["content"]).decode()
    if m["tool_calls"]:
        out["tool_calls"] = [{"id": i, "type": "function",
                              "function": {"name": n, "arguments": a}}
                             for i, n, a in m["tool_calls"]]
    for key in ("tool_call_id", "is_error", "error_code", "agent_feedback"):
        if m[key]:
            out[key] = m[key]
    return out


def _naive_json(scenario: dict[str, Any]) -> dict[str, Any]:
    trace = naive_chatcli.replay(scenario)
    for call in trace["calls"]:
        for stage in ("microcompact", "pairing", "budget"):
            call[stage]["history"] = [_render(m) for m in call[stage]["history"]]
    trace["final_history"] = [_render(m) for m in trace["final_history"]]
    for f in trace["spilled_files"]:
        data = f.pop("content")
        f["content"] = _go_text(data)
        if "content_b64" in _render({**f, "content": data, "role": "", "tool_calls": [],
                                     "tool_call_id": "", "is_error": False, "error_code": "",
                                     "agent_feedback": False}):
            f["content_b64"] = base64.b64encode(data).decode()
    return trace


def _engine_json(scenario: dict[str, Any], tmp: Path) -> dict[str, Any]:
    path = tmp / "scenario.json"
    path.write_text(json.dumps(scenario))
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path)], out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def _assert_within(expected: Any, got: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        for key, value in expected.items():
            assert key in got, f"{where}.{key}: missing"
            _assert_within(value, got[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert len(got) == len(expected), f"{where}: {len(got)} != {len(expected)} items"
        for n, (a, b) in enumerate(zip(expected, got, strict=True)):
            _assert_within(a, b, f"{where}[{n}]")
    else:
        assert got == expected, f"{where}: engine {got!r} != naive {expected!r}"


@st.composite
def contents(draw) -> str:
    size = draw(st.sampled_from(SIZES))
    piece = draw(st.sampled_from(["x", "ab\n", "中", "é\n", "line of text\n", "{\"k\": 1}\n",
                                  "def f():\n", "<<ccr:0123456789abcdef>>\n"]))
    # About `size` UTF-8 bytes (a multi-byte piece may end a few bytes short).
    return (piece * (size + 1)).encode()[:size].decode("utf-8", "ignore")


@st.composite
def scenarios(draw) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        kind = draw(st.sampled_from(["block", "block", "block", "text", "tool", "user",
                                     "feedback", "system"]))
        if kind == "block":
            # An assistant with calls, then mostly its own results (in any order, some
            # missing), sometimes an interposed message or a stray result.
            ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=4))
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": i, "type": "function",
                 "function": {"name": draw(st.sampled_from(NAMES)), "arguments": "{}"}}
                for i in ids]})
            answered = draw(st.permutations(ids))[: draw(st.integers(0, len(ids) + 1))]
            for i in answered:
                if draw(st.integers(0, 9)) == 0:
                    messages.append({"role": "user", "content": "interjection"})
                messages.append({"role": "tool", "tool_call_id": i,
                                 "content": draw(contents()), "is_error": draw(st.booleans())})
        elif kind == "text":
            messages.append({"role": "assistant", "content": "answer"})
        elif kind == "tool":
            messages.append({"role": "tool", "tool_call_id": draw(st.sampled_from(IDS)),
                             "content": draw(contents()), "is_error": draw(st.booleans())})
        elif kind == "feedback":
            messages.append({"role": "user", "content": draw(contents()),
                             "agent_feedback": True})
        else:
            messages.append({"role": kind, "content": draw(contents())})
    config: dict[str, Any] = {
        "loop_mode": draw(st.sampled_from(["agent", "coder"])),
        "ccr": draw(st.sampled_from(["on", "off"])),
        "spill_dir": draw(st.sampled_from(["/tmp/chatcli-agent-1/tool-results",
                                           "/dev/null/tool-results"])),
        "env": draw(st.sampled_from(ENVS)),
    }
    if draw(st.booleans()):
        config["anchor_text"] = "REMINDER"
    return {"config": config, "messages": messages}


# CTXSIM_DIFF_EXAMPLES raises the count for a longer hunt.
@settings(max_examples=int(os.environ.get("CTXSIM_DIFF_EXAMPLES", "60")),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scenario=scenarios())
def test_the_engine_agrees_with_a_naive_replay_of_the_behaviour_file(scenario, tmp_path) -> None:
    _assert_within(_naive_json(scenario), _engine_json(scenario, tmp_path))
