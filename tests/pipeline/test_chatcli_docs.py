"""`chatcli-docs` differs from `chatcli` exactly in the rows of SPEC §2.2's table: one test per
row, each showing both profiles on the same input."""

from __future__ import annotations

from ctxsim.pipeline.profiles import PROFILES
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.stages import budget, microcompact, pairing, tool_cap

from .helpers import assistant, ctx, tool, user


def _aged(content: str, age: int, name: str = "read_file") -> list:
    return [user(), assistant("a", names={"a": name}), tool("a", content)] + [
        assistant() for _ in range(age)
    ]


def test_row_1_3_the_order_is_pairing_then_budget_then_microcompact_on_the_copy() -> None:
    assert PROFILES["chatcli-docs"].stages == (
        ("tool_cap", "dispatch"), ("pairing", "persistent"), ("budget", "outgoing"),
        ("microcompact", "outgoing"),
    )
    assert PROFILES["chatcli"].stages[1:3] == (("microcompact", "persistent"),
                                              ("pairing", "persistent"))


def test_row_1_3_no_early_exit_and_the_summary_fires_at_age_4() -> None:
    msgs = [user(), assistant("a"), tool("a", "line\n" * 1600)]
    msgs += [m for k in range(5) for m in (assistant(f"b{k}"), tool(f"b{k}", "ok"))]
    def last_sent(profile: str) -> bytes:
        calls = list(replay(msgs, profile, {"ccr": "off", "loop_mode": "coder"}).calls())
        return calls[-1].sent[2].content
    assert last_sent("chatcli-docs").startswith("[Old tool result cleared — 1601 lines".encode())
    assert b"chars omitted from old tool result" in last_sent("chatcli")
    first = next(iter(replay(_aged("x" * 5000, 4), "chatcli-docs", {"ccr": "off"}).calls()))
    assert not first.stages[-1].report["skipped_early"]


def test_row_1_3_a_spilled_result_is_summarized_as_its_preview() -> None:
    msgs = [*_aged("y" * 25000, 4), user("next")]
    call = list(replay(msgs, "chatcli-docs", {"ccr": "off", "loop_mode": "coder"}).calls())[-1]
    assert "lines, 5K chars" in call.sent[2].content.decode()


def test_row_2_exempt_tools_are_never_compacted() -> None:
    h = _aged("x" * 5000, 4, name="Bash")
    assert microcompact.run(h, ctx("chatcli-docs", ccr="off")).report["summarized"] == 0
    assert microcompact.run(h, ctx("chatcli", ccr="off")).report["summarized"] == 1


def test_row_4_only_more_than_3000_units_are_compacted() -> None:
    h = _aged("x" * 3000, 4)
    assert microcompact.run(h, ctx("chatcli-docs", ccr="off")).report["summarized"] == 0
    assert microcompact.run(h, ctx("chatcli", ccr="off")).report["summarized"] == 1


def test_row_5_content_types_use_the_documented_table() -> None:
    ct = microcompact.content_type
    assert ct("import os\ndef f(): pass", True) == "Python source"
    assert ct(b"import os\ndef f(): pass") == "source code"
    assert ct("---\nkey: 1", True) == "diff"
    assert ct(b"---\nkey: 1") == "text"
    assert ct("q" * 300 + "package x", True) == "Go source"


def test_row_6_the_summary_size_is_written_in_k() -> None:
    assert microcompact.summary("x" * 28114, True) == (
        "[Old tool result cleared — 1 lines, 28K chars, text]"
    )
    assert microcompact.summary("x" * 999, True).endswith("999 chars, text]")
    assert b"28114 chars" in microcompact.summary(b"x" * 28114)


def test_row_7_the_synthetic_text_breaks_the_line_after_silently() -> None:
    h = [user(), assistant("a")]
    docs = pairing.run(h, ctx("chatcli-docs")).history[-1].content
    impl = pairing.run(h, ctx("chatcli")).history[-1].content
    assert b"silently.\nDo NOT" in docs and b"silently. Do NOT" in impl


def test_row_8_pairing_uses_global_id_sets_without_relocation() -> None:
    h = [user(), assistant("a"), assistant("b"), tool("b"), tool("a"), tool("zz")]
    docs = pairing.run(h, ctx("chatcli-docs"))
    assert [m.tool_call_id for m in docs.history if m.role == "tool"] == ["b", "a"]
    assert docs.report["orphan_tool_result_ids"] == ["zz"]
    assert docs.report["results_relocated"] == 0
    impl = pairing.run(h, ctx("chatcli"))
    assert impl.report["synthetic_results_injected"] == 1


def test_row_8_a_call_id_seen_anywhere_before_is_dropped() -> None:
    h = [user(), assistant("a"), tool("a"), assistant("a"), tool("a")]
    docs = pairing.run(h, ctx("chatcli-docs"))
    assert docs.history[3].tool_calls == () and docs.report["duplicate_tool_use_pruned"] == 1
    assert not pairing.run(h, ctx("chatcli")).report["has_repairs"]


def test_row_9_the_preview_always_snaps_and_counts_what_was_left_out() -> None:
    body = "a" * 100 + "\n" + "b" * 20000 + "\n" + "c" * 100
    docs = budget.spill_preview(body, "/p", True)
    assert docs.startswith("a" * 100 + "\n\n\n... [20001 chars omitted")
    assert docs.endswith("]\n\n" + "c" * 100)
    impl = budget.spill_preview(body.encode(), "/p", False)
    assert impl.startswith(b"a" * 100 + b"\n" + b"b" * 3899 + b"\n\n... [15202 chars omitted")


def test_row_12_sizes_are_characters_not_bytes() -> None:
    text = "é" * 15000  # 30000 bytes, 15000 characters
    h = [assistant("a"), tool("a", text)]
    assert budget.run(h, ctx("chatcli-docs")).report["results_truncated"] == 0
    assert budget.run(h, ctx("chatcli")).report["results_truncated"] == 1
    capped = tool_cap.run([assistant("a"), tool("a", "é" * 30001)], ctx("chatcli-docs"))
    assert capped.report["input_len"] == 30001 and capped.report["stored_len"] < 30001
    assert capped.history[-1].content.decode("utf-8")  # a character cut stays valid UTF-8
