"""Scenarios for the held-out reference cases the behaviour file and the gateway README describe
but do not ship, run through the real `simulate --write-spills DIR`; the expected numbers are
worked out by hand from the written rules (see each test)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ctxsim.cli import main

SPILL_DIR = "/tmp/chatcli-tool-results"


def simulate(tmp_path: Path, scenario: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path), "--write-spills", str(tmp_path / "spills")], out, err) == 0, (
        err.getvalue())
    return json.loads(out.getvalue())


def call(cid: str, name: str = "bash", arguments: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(*calls: dict[str, Any], content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


def tool(cid: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def msg(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": content}


# Every gateway shape the README lists, in one transcript. bytes4 costs in brackets:
#  0 system [5]   1 user [5]   2 assistant c1 [5]   3 user between the call and its result [5]
#  4 result c1 [3 + 10 + 1 = 14]   5 assistant c2 [5]   6 text answer [5]
#  7 result c2 after the next assistant [14]   8 result answering no call [14]
#  9 system in the middle [5]   10 last user [5]   11 assistant whose call has no result [5]
# Conversation: 87 tokens. Removal order: 1, {2, 4}, 3, {5, 7}, 6, 8, (9, 10 kept), {11}.
GATEWAY_SHAPES = [
    msg("system", "S" * 8), msg("user", "U" * 8), assistant(call("c1")), msg("user", "I" * 8),
    tool("c1", "R" * 40), assistant(call("c2")), msg("assistant", "A" * 8), tool("c2", "R" * 40),
    tool("zz", "O" * 40), msg("system", "M" * 8), msg("user", "Q" * 8), assistant(call("c3")),
]


def aivax(tmp_path: Path, limit: int | None, action: str, **extra: Any) -> dict[str, Any]:
    trace = simulate(tmp_path, {"profile": "aivax", "config": {
        "counter": "bytes4", "toolContextCount": 0, "contextMaximumSize": limit,
        "contextOverflowAction": action, **extra}, "messages": GATEWAY_SHAPES})
    return trace["calls"][-1]


def test_a_transcript_ending_with_unanswered_calls_gets_a_trailing_call(tmp_path) -> None:
    trace = simulate(tmp_path, {"profile": "aivax", "config": {"counter": "bytes4"},
                                "messages": GATEWAY_SHAPES})
    assert [c["response_input_index"] for c in trace["calls"]] == [2, 5, 6, 11, None]


def test_truncate_removes_each_assistant_with_its_results_wherever_they_sit(tmp_path) -> None:
    report = aivax(tmp_path, 40, "Truncate")["context_limit"]
    assert report["tokens_before"] == 87 and report["tokens_after"] == 39
    assert report["removed_indices"] == [1, 2, 3, 4, 5, 7] and report["removed"] == 6
    assert report["error"] is None and report["over_after_truncation"] is False


def test_truncate_stops_at_exactly_the_limit_and_skips_the_middle_system_message(
        tmp_path) -> None:
    report = aivax(tmp_path, 20, "Truncate")["context_limit"]
    assert report["removed_indices"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert report["tokens_after"] == 20 and report["over_after_truncation"] is False
    assert [m["content"] for m in report["history"]] == ["S" * 8, "M" * 8, "Q" * 8, ""]


def test_removal_goes_on_past_the_last_user_message_then_truncate_hard_fails(tmp_path) -> None:
    soft = aivax(tmp_path, 10, "Truncate")["context_limit"]
    hard = aivax(tmp_path, 10, "TruncateHard")["context_limit"]
    for report in (soft, hard):
        assert report["removed_indices"] == [1, 2, 3, 4, 5, 6, 7, 8, 11]
        assert report["tokens_after"] == 15 and report["over_after_truncation"] is True
        assert [m["content"] for m in report["history"]] == ["S" * 8, "M" * 8, "Q" * 8]
    assert soft["error"] is None and hard["error"] == "context_overflow"


def test_throw_fails_only_when_strictly_over_and_reports_its_input(tmp_path) -> None:
    at = aivax(tmp_path, 87, "Throw")["context_limit"]
    over = aivax(tmp_path, 86, "Throw")["context_limit"]
    assert at["error"] is None and over["error"] == "context_overflow"
    assert over["removed"] == 0 and len(over["history"]) == len(GATEWAY_SHAPES)


def test_tool_context_counts_tool_messages_by_position_and_instructions_cost_3_plus(
        tmp_path) -> None:
    # Results 4 and 7 (10 tokens each) get the 48-byte placeholder (12 tokens each, so the
    # prompt grows by 4), result 8 is the most recent; instructions "xxxxx" cost 3 + 2.
    last = aivax(tmp_path, None, "Truncate", toolContextCount=1, systemInstructions="x" * 5)
    assert (last["tool_context"]["kept"], last["tool_context"]["replaced"]) == (1, 2)
    assert [m["content"] for m in last["tool_context"]["history"] if m["role"] == "tool"] == [
        "[tool response truncated - call this tool again]"] * 2 + ["O" * 40]
    assert last["context_limit"]["tokens_before"] == 87 + 4 + 5
    assert last["context_limit"]["limit"] is None


# clear_tool_uses: six tool uses flattened in message then array order (c3 and c4 are parallel),
# results of 40 bytes (10 tokens) and one result answering no call.
ARGS = '{"p":"abcdefgh"}'  # 4 tokens; "{}" is 1
CLEARING = [
    msg("user", "go"), assistant(call("c1", arguments=ARGS)), tool("c1", "R" * 40),
    assistant(call("c2", "read", ARGS)), tool("c2", "R" * 40),
    assistant(call("c3", arguments=ARGS), call("c4", arguments=ARGS)), tool("c3", "R" * 40),
    tool("c4", "R" * 40), assistant(call("c5", arguments=ARGS)), tool("c5", "R" * 40),
    tool("zz", "O" * 40), assistant(call("c6", arguments=ARGS)),
]


def clear(tmp_path: Path, **config: Any) -> dict[str, Any]:
    trace = simulate(tmp_path, {"profile": "anthropic-clear-tool-uses", "config": {
        "counter": "bytes4", "trigger": {"type": "tool_uses", "value": 5}, **config},
        "messages": CLEARING})
    return trace["calls"][-1]["clear_tool_uses"]


def results(report: dict[str, Any]) -> list[str]:
    return [m["content"] for m in report["history"] if m["role"] == "tool"]


def test_the_tool_uses_trigger_is_strictly_greater(tmp_path) -> None:
    report = clear(tmp_path, trigger={"type": "tool_uses", "value": 6})
    assert report["applied"] is False and results(report) == ["R" * 40] * 5 + ["O" * 40]


def test_uses_older_than_the_keep_window_are_cleared_at_once_in_flattened_order(
        tmp_path) -> None:
    report = clear(tmp_path)
    # c1, c2, c3 are older than the 3 most recent (c4, c5, c6); each clearing saves 10 - 3.
    assert results(report) == ["[cleared]"] * 3 + ["R" * 40] * 2 + ["O" * 40]
    assert (report["cleared_tool_uses"], report["cleared_input_tokens"]) == (3, 21)


def test_excluded_tools_still_count_toward_the_keep_window(tmp_path) -> None:
    report = clear(tmp_path, exclude_tools=["read"], clear_tool_inputs=True)
    assert results(report) == ["[cleared]", "R" * 40, "[cleared]", "R" * 40, "R" * 40, "O" * 40]
    arguments = [c["function"]["arguments"] for m in report["history"]
                 for c in m.get("tool_calls", [])]
    assert arguments == ["{}", ARGS, "{}", ARGS, ARGS, ARGS]
    assert (report["cleared_tool_uses"], report["cleared_tool_inputs"]) == (2, 2)
    assert report["cleared_input_tokens"] == 2 * 7 + 2 * 3


def test_clear_tool_inputs_as_a_list_rewrites_only_those_tools(tmp_path) -> None:
    report = clear(tmp_path, clear_tool_inputs=["read"])
    arguments = [c["function"]["arguments"] for m in report["history"]
                 for c in m.get("tool_calls", [])]
    assert arguments == [ARGS, "{}", ARGS, ARGS, ARGS, ARGS]
    assert (report["cleared_tool_uses"], report["cleared_tool_inputs"]) == (3, 1)


def test_clear_at_least_exactly_the_saving_applies_and_one_more_does_not(tmp_path) -> None:
    exact = clear(tmp_path, clear_at_least={"type": "input_tokens", "value": 21})
    more = clear(tmp_path, clear_at_least={"type": "input_tokens", "value": 22})
    assert exact["applied"] is True and exact["cleared_input_tokens"] == 21
    assert more["applied"] is False and results(more) == ["R" * 40] * 5 + ["O" * 40]


def test_a_longer_placeholder_gives_a_negative_saving(tmp_path) -> None:
    report = clear(tmp_path, placeholder="P" * 48)
    assert report["applied"] is True and report["cleared_input_tokens"] == 3 * (10 - 12)


# --- ChatCLI ------------------------------------------------------------------------------

def chatcli(tmp_path: Path, messages: list[dict[str, Any]], **config: Any) -> dict[str, Any]:
    return simulate(tmp_path, {"config": {"loop_mode": "agent", "ccr": "off",
                                          "spill_dir": SPILL_DIR, **config},
                               "messages": messages})


def test_case_16_a_5201_byte_result_grows_to_5242_bytes_with_a_long_id(tmp_path) -> None:
    long_id = "toolu_" + "L" * 144  # 150 bytes: the path in the marker is 189 bytes
    trace = chatcli(tmp_path, [msg("user", "go"), assistant(call(long_id)),
                               tool(long_id, "x" * 5201)],
                    env={"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "1"})
    budget = trace["calls"][-1]["budget"]
    preview = budget["history"][2]["content"]
    assert len(preview.encode()) == 5242 and budget["bytes_saved_to_disk"] == -41
    assert preview == ("x" * 4000 + f"\n\n... [201 chars omitted — full output saved to "
                       f"{SPILL_DIR}/budget_{long_id}_1.txt]\n\n" + "x" * 1000)
    assert budget["total_final_chars"] == 5242 and budget["results_truncated"] == 1


def test_case_38_odd_ids_keep_everything_but_the_slash_in_file_names(tmp_path) -> None:
    ids = ["a/b", "a b", "../../etc/passwd", "web_fetch:0", "toolu_01A\\B"]
    trace = chatcli(tmp_path, [msg("user", "go"), assistant(*map(call, ids)),
                               *(tool(i, "z" * 20001) for i in ids)],
                    spill_dir="/tmp/x/../chatcli-agent-1/tool-results/")
    assert [(f["name"], f["path"]) for f in trace["spilled_files"]] == [
        (n, f"/tmp/chatcli-agent-1/tool-results/{n}") for n in (
            "budget_a_b_1.txt", "budget_a b_2.txt", "budget_.._.._etc_passwd_3.txt",
            "budget_web_fetch:0_4.txt", "budget_toolu_01A\\B_5.txt")]
    assert sorted(p.name for p in (tmp_path / "spills").iterdir()) == sorted(
        f["name"] for f in trace["spilled_files"])


def test_case_28_a_summary_of_a_stub_reuses_the_stubs_marker(tmp_path) -> None:
    # Head/tail 4000/1000 keep the age-2 stub over 3000 bytes; it is summarized at age 4 with
    # its own size, and the summary carries the marker of the original, not a new archive key.
    big = "\n".join(f"line {i:05d} " + "x" * 40 for i in range(400))
    messages = [msg("user", "go"), assistant(call("a")), tool("a", big)]
    for n in range(5):
        messages += [assistant(call(f"c{n}")), tool(f"c{n}", "ok")]
    trace = chatcli(tmp_path, messages, loop_mode="coder", ccr="on",
                    env={"CHATCLI_MICROCOMPACT_HEAD_CHARS": "4000",
                         "CHATCLI_MICROCOMPACT_TAIL_CHARS": "1000"})
    reports = [c["microcompact"] for c in trace["calls"]]
    assert [(r["truncated"], r["summarized"]) for r in reports] == [
        (0, 0), (0, 0), (0, 0), (1, 0), (1, 0), (0, 1), (0, 0)]
    assert reports[4]["chars_saved"] == 0  # kept as is (<= 5100 bytes): still counted
    stub = reports[4]["history"][2]["content"]
    marker = "\n[full content recoverable via @recall <<ccr:f2307293e417eb33>>]"
    assert len(stub.encode()) == 5055 and stub.endswith(marker)
    assert reports[5]["history"][2]["content"] == (
        "[Old tool result cleared — 98 lines, 5055 chars, text]" + marker)


def test_case_31_env_values_are_taken_only_when_atoi_gives_more_than_zero(tmp_path) -> None:
    trace = chatcli(tmp_path, [], env={
        "CHATCLI_MICROCOMPACT_HEAD_CHARS": "+1", "CHATCLI_MICROCOMPACT_TAIL_CHARS": "0",
        "CHATCLI_MICROCOMPACT_MIN_CONTENT": "1_000", "CHATCLI_TOOL_RESULT_MAX_CHARS": "-5",
        "CHATCLI_TOOL_RESULT_BUDGET_CHARS": " 2000", "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "",
    })
    config = trace["effective_config"]
    assert (config["mc_truncate_head_chars"], config["mc_truncate_tail_chars"],
            config["mc_min_content_size"], config["per_result_max_chars"],
            config["turn_budget_chars"], config["mc_turns_before_truncate"]) == (
        1, 500, 3000, 20000, 200000, 2)
