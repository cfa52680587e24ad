"""Unit tests of ChatCLI's stages as implemented, with the behaviour file's exact strings."""

from __future__ import annotations

import hashlib

from ctxsim.pipeline.params import go_atoi, resolve_env
from ctxsim.pipeline.spill import MemorySpillSink, clean_join
from ctxsim.pipeline.stages import budget, microcompact, pairing, tool_cap

from .helpers import assistant, contents, ctx, system, tool, user

SYNTH = (
    "[Tool result missing — the tool execution was interrupted or failed silently. Do NOT "
    "retry this tool call. Analyze what went wrong and try a different approach.]"
)


# --- tool_cap --------------------------------------------------------------------------------

def test_the_cap_keeps_a_result_of_exactly_the_cap() -> None:
    assert tool_cap.truncate_for_llm(b"x" * 30000, 30000) == b"x" * 30000


def test_the_cap_keeps_head_5000_marker_and_tail_1000() -> None:
    s = b"h" * 5000 + b"m" * 25001 + b"t" * 1000
    out = tool_cap.truncate_for_llm(s, 30000)
    assert out == b"h" * 5000 + b"\n\n... [TRUNCATED 25001 chars omitted, 6000 kept] ...\n\n" + (
        b"t" * 1000
    )


def test_a_small_cap_hard_cuts_with_the_short_marker() -> None:
    assert tool_cap.truncate_for_llm(b"abcdefghij" * 700, 6000) == b"abcdefghij" * 600 + (
        b"\n\n... [TRUNCATED]"
    )


def test_native_names_dispatch_as_coder_and_plugin_names_keep_their_cap() -> None:
    assert tool_cap.dispatch_name("read_file") == "@coder"
    assert tool_cap.dispatch_name("web_fetch") == "@webfetch"
    assert tool_cap.dispatch_name("@read") == "@read"
    assert tool_cap.plugin_cap("@read") == 80000
    assert tool_cap.plugin_cap("@docs-flatten") == 50000
    assert tool_cap.dispatch_name("Read", {"Read": "@read"}) == "@read"


def test_error_results_are_never_capped() -> None:
    big = "e" * 40000
    r = tool_cap.run([assistant("a"), tool("a", big, is_error=True)], ctx())
    assert r.history[-1].content == big.encode()
    assert r.report["cap_applied"] is False and r.report["cap"] == 30000


def test_a_result_after_a_text_only_answer_is_stored_verbatim() -> None:
    r = tool_cap.run([assistant("a"), assistant(), tool("a", "x" * 40000)], ctx())
    assert r.report["function_name"] == "" and r.report["cap"] == 0
    assert len(r.history[-1].content) == 40000


# --- pairing ---------------------------------------------------------------------------------

def test_the_synthetic_result_has_the_exact_text_and_error_code() -> None:
    r = pairing.run([user(), assistant("a", "b"), tool("a")], ctx())
    synth = r.history[-1]
    assert synth.content.decode() == SYNTH and len(synth.content) == 163
    assert synth.is_error and synth.error_code == "missing_result"
    assert r.report["missing_tool_use_ids"] == ["b"]


def test_a_valid_history_is_returned_unchanged() -> None:
    h = (user(), assistant("a", "b"), tool("b"), tool("a"))
    r = pairing.run(h, ctx())
    assert r.history == h and not r.report["has_repairs"]


def test_a_result_beyond_the_next_assistant_is_not_claimed() -> None:
    h = [user(), assistant("a"), assistant("b"), tool("b"), tool("a")]
    r = pairing.run(h, ctx())
    assert [m.tool_call_id for m in r.history if m.role == "tool"] == ["a", "b"]
    assert r.report["orphan_tool_result_ids"] == ["a"]
    assert r.report["synthetic_results_injected"] == 1


def test_interposed_messages_move_after_the_relocated_results() -> None:
    h = [user(), assistant("a", "b"), user("wait"), tool("b"), tool("a")]
    r = pairing.run(h, ctx())
    assert [m.role for m in r.history] == ["user", "assistant", "tool", "tool", "user"]
    assert [m.tool_call_id for m in r.history[2:4]] == ["a", "b"]
    assert r.report["results_relocated"] == 2


def test_empty_and_duplicate_call_ids_are_pruned_within_a_message() -> None:
    h = [user(), assistant("a", "a", ""), tool("a")]
    r = pairing.run(h, ctx())
    assert [c.id for c in r.history[1].tool_calls] == ["a"]
    assert r.report["duplicate_tool_use_pruned"] == 2


def test_an_empty_result_id_is_always_an_orphan() -> None:
    r = pairing.run([user(), tool("")], ctx())
    assert r.report["orphan_tool_result_ids"] == [""]


def test_pairing_twice_changes_nothing() -> None:
    h = [user(), assistant("a", "b"), user("x"), tool("b"), tool("zz")]
    once = pairing.run(h, ctx())
    twice = pairing.run(once.history, ctx())
    assert twice.history == once.history and not twice.report["has_repairs"]


# --- budget ----------------------------------------------------------------------------------

def test_a_result_of_exactly_the_limit_is_not_spilled() -> None:
    r = budget.run([assistant("a"), tool("a", "x" * 20000)], ctx())
    assert r.report["results_truncated"] == 0


def test_it_spills_results_over_budget() -> None:
    sink = MemorySpillSink()
    body = "x" * 20001
    r = budget.run([assistant("a/b"), tool("a/b", body)], ctx(sink=sink,
                                                               spill_dir="/tmp/s"))
    assert sink.files[0].name == "budget_a_b_1.txt" and sink.files[0].data == body.encode()
    preview = r.history[-1].content.decode()
    assert preview == "x" * 4000 + (
        "\n\n... [15001 chars omitted — full output saved to /tmp/s/budget_a_b_1.txt]\n\n"
    ) + "x" * 1000
    assert r.report["bytes_saved_to_disk"] == 0  # pass 1 never counts its savings


def test_a_name_over_255_bytes_fails_the_write_with_the_fallback() -> None:
    call_id = "i" * 250
    r = budget.run([assistant(call_id), tool(call_id, "y" * 20010)], ctx())
    assert r.history[-1].content == b"y" * 20000 + (
        "\n... [output truncated — disk write failed]".encode()
    )
    assert r.report["spilled_files"] == [] and r.report["results_persisted_disk"] == 1


def test_a_directory_through_a_file_fails_creation_without_using_a_number() -> None:
    c = ctx(spill_dir="/dev/null/tool-results")
    r = budget.run([assistant("a"), tool("a", "y" * 20010)], c)
    assert r.history[-1].content.endswith("[output truncated — dir creation failed]".encode())
    assert c.spills.counter == 0


def test_head_snaps_only_after_half_and_tail_only_before_half() -> None:
    no_snap = "a" * 2000 + "\n" + "b" * 18499
    assert budget.spill_preview(no_snap.encode(), "/p", False).startswith(b"a" * 2000 + b"\nb")
    snap = "a" * 2001 + "\n" + "b" * 18498
    out = budget.spill_preview(snap.encode(), "/p", False)
    assert out.startswith(b"a" * 2001 + b"\n\n\n... [")


def test_short_contents_get_a_negative_count_and_no_tail() -> None:
    out = budget.spill_preview(b"z" * 150, "/p", False)
    marker = "\n\n... [-4850 chars omitted — full output saved to /p]\n\n"
    assert out == b"z" * 150 + marker.encode()


def test_pass_two_cuts_the_largest_first_until_the_group_fits() -> None:
    h = [assistant("a", "b", "c"), tool("a", "a" * 19000), tool("b", "b" * 19500),
         tool("c", "c" * 19900)]
    r = budget.run(h, ctx(env={"CHATCLI_TOOL_RESULT_BUDGET_CHARS": "50000"}))
    assert r.report["spilled_files"] == ["budget_c_1.txt"]
    assert r.report["bytes_saved_to_disk"] > 0


def test_groups_close_on_user_system_and_text_answers() -> None:
    h = [assistant("a"), tool("a"), user(), tool("a"), assistant("b"), tool("b"), system(),
         assistant(), tool("b")]
    assert budget.groups(h) == [[1], [5]]


def test_spill_paths_are_cleaned_like_go() -> None:
    assert clean_join("/tmp//x/../y/", "budget_1.txt") == "/tmp/y/budget_1.txt"
    assert clean_join("rel", "budget_.._.._etc_passwd_3.txt") == "rel/budget_.._.._etc_passwd_3.txt"


# --- microcompact ----------------------------------------------------------------------------

def _aged(content: str, age: int) -> list:
    return [user(), assistant("a"), tool("a", content)] + [assistant() for _ in range(age)]


def test_microcompact_skips_the_first_loop_turns() -> None:
    r = microcompact.run(_aged("x" * 5000, 5), ctx(loop_turn=1, ccr="off"))
    assert r.report["skipped_early"] and contents(r.history)[2] == b"x" * 5000


def test_3000_bytes_is_compacted_and_2999_is_not() -> None:
    assert microcompact.run(_aged("x" * 3000, 4), ctx(ccr="off")).report["summarized"] == 1
    assert microcompact.run(_aged("x" * 2999, 4), ctx(ccr="off")).report["summarized"] == 0


def test_age_two_gives_the_head_tail_preview_with_exact_marker() -> None:
    body = "a" * 3000 + "b" * 500
    r = microcompact.run(_aged(body, 2), ctx(ccr="off"))
    assert r.history[2].content.decode() == (
        "a" * 2000 + "\n[... 1000 chars omitted from old tool result ...]\n" + "b" * 500
    )
    assert r.report["truncated"] == 1 and r.report["chars_saved"] > 0


def test_age_four_gives_the_one_line_summary() -> None:
    body = "package main\n" + "x\n" * 2000
    r = microcompact.run(_aged(body, 4), ctx(ccr="off"))
    assert r.history[2].content.decode() == (
        f"[Old tool result cleared — 2002 lines, {len(body)} chars, Go source]"
    )


def test_content_types_follow_the_implemented_rule_order() -> None:
    ct = microcompact.content_type
    assert ct(b"import os\ndef f(): pass") == "source code"
    assert ct(b"x = undef y") == "Python source"
    assert ct(b"---\na: 1") == "text"
    assert ct(b"--- a/x\n+++ b/x") == "diff"
    assert ct(b"q" * 195 + b"package x") == "text"
    assert ct("\u00a0{}".encode()) == "JSON"
    assert ct("\ufeff{}".encode()) == "text"
    assert ct(b"\x1f{}") == "text"
    assert ct(b"commit abc") == "git log"


def test_ccr_appends_the_recall_marker_of_the_archived_original() -> None:
    body = "x" * 5000
    key = hashlib.sha256(body.encode()).hexdigest()[:16]
    r = microcompact.run(_aged(body, 4), ctx(ccr="on"))
    assert r.history[2].content.decode().endswith(
        f"\n[full content recoverable via @recall <<ccr:{key}>>]"
    )


def test_markers_dropped_by_the_rewrite_are_listed_even_with_ccr_off() -> None:
    body = "<<ccr:0123456789abcdef>>" + "x" * 5000
    r = microcompact.run(_aged(body, 4), ctx(ccr="off"))
    assert r.history[2].content.endswith(b"@recall <<ccr:0123456789abcdef>>]")


def test_the_recall_keys_of_an_original_are_kept_across_replays_within_a_byte_bound() -> None:
    keys = microcompact.RecallKeys(max_bytes=100, max_item=60)
    marked = b"<<ccr:0123456789abcdef>> and <<ccr:0123456789abcdef>> again"  # 59 bytes
    assert keys.of(marked)[0] == (b"0123456789abcdef",)  # once, though it appears twice
    full = b"<<ccr:0123456789abcdef>><<ccr:fedcba9876543210>><<ccr:0123456789abcdef>>"
    found = keys.of(full)  # 72 bytes: longer than max_item, answered but not kept
    assert found == ((b"0123456789abcdef", b"fedcba9876543210"), b"")  # marked: no archive
    plain = [bytes([65 + n]) * 30 for n in range(4)]
    first = keys.of(plain[0])
    assert first == ((), hashlib.sha256(plain[0]).hexdigest()[:16].encode())
    assert keys.of(plain[0]) is first  # the same original object: its kept keys
    keys.of(plain[1])  # 59 + 30 + 30 bytes > 100: the oldest (the marked one) goes
    assert not keys.holds(marked) and keys.holds(plain[0])
    keys.of(plain[2])
    keys.of(plain[3])  # one by one, oldest first: only what the bound needs
    assert [keys.holds(p) for p in plain] == [False, True, True, True] and keys._bytes == 90
    # An equal original in another object (a session loaded again) is looked up by identity,
    # not by hashing and comparing its bytes: its keys are made again, alike.
    equal = bytes(bytearray(plain[3]))
    assert keys.of(equal) == keys.of(plain[3]) and keys.holds(equal)


def test_a_kept_recall_key_makes_the_same_suffix_as_a_fresh_one() -> None:
    body = "y" * 5000
    aged = _aged(body, 4)
    fresh = microcompact.run(aged, ctx(ccr="on")).history[2].content
    assert microcompact.RECALL_KEYS.holds(aged[2].content)
    again = microcompact.run(aged, ctx(ccr="on")).history[2].content
    assert again == fresh and fresh.endswith(
        f"<<ccr:{hashlib.sha256(body.encode()).hexdigest()[:16]}>>]".encode())


# --- environment -----------------------------------------------------------------------------

def test_env_values_are_parsed_like_go_atoi() -> None:
    assert go_atoi("+1") == 1 and go_atoi("-5") == -5
    for bad in ("", " 2000", "1_000", "2e5", "abc", "9223372036854775808"):
        assert go_atoi(bad) is None


def test_ignored_env_values_report_the_default_and_a_warning() -> None:
    env = resolve_env({"CHATCLI_MICROCOMPACT_HEAD_CHARS": "0",
                       "CHATCLI_MICROCOMPACT_TAIL_CHARS": "+7"})
    head = env["CHATCLI_MICROCOMPACT_HEAD_CHARS"]
    assert head.effective == 2000 and "ignored" in head.warning
    assert env["CHATCLI_MICROCOMPACT_TAIL_CHARS"].effective == 7
