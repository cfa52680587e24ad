"""Unit tests of SPEC §2.3 (AIVAX) and §2.4 (Anthropic clear_tool_uses), with bytes4."""

from __future__ import annotations

from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.params import AIVAX_PLACEHOLDER_EN, AIVAX_PLACEHOLDER_PT
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.stages import clear_tool_uses, context_limit, tool_context

from .helpers import assistant, ctx, system, tool, user


def aivax(**config):
    return ctx("aivax", counter="bytes4", **config)


def ctu(**config):
    return ctx("anthropic-clear-tool-uses", counter="bytes4", **config)


# --- tool_context ----------------------------------------------------------------------------

def test_only_the_n_most_recent_tool_messages_keep_their_content() -> None:
    h = [user(), assistant("a", "b", "c"), tool("a", "1"), tool("b", "2"), tool("c", "3")]
    r = tool_context.run(h, aivax(toolContextCount=2))
    assert [m.content for m in r.history[2:]] == [AIVAX_PLACEHOLDER_EN.encode(), b"2", b"3"]
    assert r.report == {"kept": 2, "replaced": 1}


def test_the_placeholder_replaces_even_shorter_content_and_can_be_portuguese() -> None:
    h = [assistant("a", "b"), tool("a", "x"), tool("b", "y")]
    r = tool_context.run(h, aivax(toolContextCount=1, toolContextPlaceholder=AIVAX_PLACEHOLDER_PT))
    assert r.history[1].content == AIVAX_PLACEHOLDER_PT.encode()


def test_the_older_positions_handed_out_at_a_call_stay_what_they_were() -> None:
    """The memo appends to one list of tool positions and hands out views of it: a later call
    appending to it, or starting again from scratch, never changes an earlier call's."""
    c = aivax(toolContextCount=1)
    c.memo = {}
    h = [user(), assistant("a", "b"), tool("a"), tool("b")]
    seen = []
    for step in range(4):
        r = tool_context.run(h, c)
        seen.append((r.changed, list(r.changed)))
        h = [*h, assistant(f"c{step}"), tool(f"c{step}")]
    h = h[:4]  # shorter: the memo starts again
    seen.append((tool_context.run(h, c).changed, [2]))
    for view, positions in seen:
        assert list(view) == positions and len(view) == len(positions)
    assert [p for _, p in seen[:4]] == [[2], [2, 3], [2, 3, 5], [2, 3, 5, 7]]


def test_tool_context_off_counts_every_tool_message_as_kept() -> None:
    h = [assistant("a", "b"), tool("a"), tool("b")]
    r = tool_context.run(h, aivax(toolContextCount=0))
    assert r.report == {"kept": 2, "replaced": 0} and r.history == tuple(h)


# --- context_limit ---------------------------------------------------------------------------

def test_throw_fails_only_when_strictly_over_and_removes_nothing() -> None:
    h = [user("abcd")]  # 3 + 1 = 4 tokens
    assert context_limit.run(h, aivax(contextMaximumSize=4,
                                      contextOverflowAction="Throw")).report["error"] is None
    r = context_limit.run(h, aivax(contextMaximumSize=3, contextOverflowAction="Throw"))
    assert r.report["error"] == "context_overflow" and r.history == tuple(h)
    assert r.report["over_after_truncation"] is False


def test_truncate_never_removes_system_messages_or_the_last_user_message() -> None:
    h = [system("s" * 40), user("old"), assistant(text="a" * 40), system("mid"), user("now")]
    r = context_limit.run(h, aivax(contextMaximumSize=1, contextOverflowAction="Truncate"))
    assert r.report["removed_indices"] == [1, 2]
    assert [m.role for m in r.history] == ["system", "system", "user"]
    assert r.report["error"] is None and r.report["over_after_truncation"] is True


def test_an_assistant_goes_together_with_its_results_wherever_they_sit() -> None:
    h = [user("q"), assistant("a", "b"), tool("b", "r" * 8), user("u"), tool("a", "r" * 8),
         assistant(text="final"), user("again")]
    limit = sum(3 for _ in h)  # forces the first removal only
    r = context_limit.run(h, aivax(contextMaximumSize=limit, contextOverflowAction="Truncate"))
    assert r.report["removed_indices"][:4] == [0, 1, 2, 4]


def test_a_result_without_a_call_is_removed_on_its_own() -> None:
    h = [tool("zz", "x" * 40), user("now")]
    r = context_limit.run(h, aivax(contextMaximumSize=5, contextOverflowAction="Truncate"))
    assert r.report["removed_indices"] == [0]


def test_removal_goes_past_the_last_user_message_into_the_current_loop() -> None:
    h = [user("now"), assistant("a"), tool("a", "x" * 40)]
    r = context_limit.run(h, aivax(contextMaximumSize=4, contextOverflowAction="Truncate"))
    assert r.report["removed_indices"] == [1, 2] and r.report["tokens_after"] == 4


def test_truncate_continues_over_the_limit_but_truncate_hard_fails() -> None:
    h = [system("s" * 80), user("now")]
    soft = context_limit.run(h, aivax(contextMaximumSize=5, contextOverflowAction="Truncate"))
    hard = context_limit.run(h, aivax(contextMaximumSize=5,
                                      contextOverflowAction="TruncateHard"))
    assert soft.report["error"] is None and soft.report["removed"] == 0
    assert hard.report["error"] == "context_overflow"


def test_the_full_prompt_includes_instructions_tools_and_schema() -> None:
    c = aivax(contextMaximumSize=100, systemInstructions="abcd")
    c.tools = [{"a": 1}]
    c.response_schema = {"type": "object"}
    r = context_limit.run([user("abcd")], c)
    assert r.report["tokens_before"] == 4 + (3 + 1) + 3 + 5


def test_no_limit_reports_null_and_passes_everything() -> None:
    r = context_limit.run([user("x" * 400)], aivax(contextMaximumSize=None))
    assert r.report["limit"] is None and r.report["error"] is None


def test_a_failed_call_is_recorded_and_the_replay_goes_on() -> None:
    msgs = [user("x" * 400), Message.of("assistant", "ok"), user("y")]
    calls = list(replay(msgs, "aivax", {"counter": "bytes4", "contextMaximumSize": 10,
                                        "contextOverflowAction": "Throw"}).calls())
    assert [c.error for c in calls] == ["context_overflow", "context_overflow"]


# --- clear_tool_uses -------------------------------------------------------------------------

def _calls(n: int, big: int = 40) -> list[Message]:
    h: list[Message] = [user("go")]
    for k in range(n):
        h += [assistant(f"t{k}", names={f"t{k}": "bash" if k == 0 else "read"}),
              tool(f"t{k}", "r" * big)]
    return h


def test_results_older_than_the_keep_window_are_cleared_at_once() -> None:
    r = clear_tool_uses.run(_calls(5), ctu(trigger={"type": "tool_uses", "value": 4}))
    tools = [m.content for m in r.history if m.role == "tool"]
    assert tools == [b"[cleared]", b"[cleared]", b"r" * 40, b"r" * 40, b"r" * 40]
    assert r.report["applied"] and r.report["cleared_tool_uses"] == 2
    assert r.report["cleared_input_tokens"] == 2 * (10 - 3)


def test_the_trigger_on_input_tokens_is_strictly_greater() -> None:
    h = _calls(4)
    from ctxsim.pipeline.tokens import Bytes4Counter, full_prompt_tokens

    total = full_prompt_tokens(h, Bytes4Counter())
    at = clear_tool_uses.run(h, ctu(trigger={"type": "input_tokens", "value": total}))
    over = clear_tool_uses.run(h, ctu(trigger={"type": "input_tokens", "value": total - 1}))
    assert not at.report["applied"] and over.report["applied"]


def test_excluded_tools_are_never_cleared_but_count_toward_keep() -> None:
    r = clear_tool_uses.run(_calls(5), ctu(trigger={"type": "tool_uses", "value": 0},
                                           keep={"type": "tool_uses", "value": 3},
                                           exclude_tools=["bash"]))
    tools = [m.content for m in r.history if m.role == "tool"]
    assert tools[0] == b"r" * 40 and tools[1] == b"[cleared]"
    assert r.report["cleared_tool_uses"] == 1


def test_clear_tool_inputs_empties_the_arguments_of_cleared_calls_only() -> None:
    r = clear_tool_uses.run(_calls(4), ctu(trigger={"type": "tool_uses", "value": 0},
                                           keep={"type": "tool_uses", "value": 2},
                                           clear_tool_inputs=["read"]))
    args = [c.arguments for m in r.history for c in m.tool_calls]
    assert args == ["{}", "{}", "{}", "{}"]  # already "{}" in the helper; count is the proof
    assert r.report["cleared_tool_inputs"] == 1


def test_clear_tool_inputs_true_rewrites_real_arguments() -> None:
    h = [user(), Message.of("assistant", "", tool_calls=[ToolCall("a", "read", '{"p":1}')]),
         tool("a", "x" * 40), assistant("b"), tool("b")]
    r = clear_tool_uses.run(h, ctu(trigger={"type": "tool_uses", "value": 0},
                                   keep={"type": "tool_uses", "value": 1},
                                   clear_tool_inputs=True))
    assert r.history[1].tool_calls[0].arguments == "{}"


def test_clear_at_least_blocks_a_small_saving_and_exactly_m_applies() -> None:
    base = {"trigger": {"type": "tool_uses", "value": 0}, "keep": {"type": "tool_uses",
                                                                   "value": 1}}
    saving = 10 - 3
    exact = clear_tool_uses.run(_calls(2), ctu(**base, clear_at_least={"type": "input_tokens",
                                                                        "value": saving}))
    blocked = clear_tool_uses.run(_calls(2), ctu(**base, clear_at_least={
        "type": "input_tokens", "value": saving + 1}))
    assert exact.report["applied"] and not blocked.report["applied"]
    assert blocked.history == tuple(_calls(2))


def test_results_without_a_call_are_left_alone() -> None:
    h = [tool("nobody", "x" * 40), *_calls(2)]
    r = clear_tool_uses.run(h, ctu(trigger={"type": "tool_uses", "value": 0},
                                   keep={"type": "tool_uses", "value": 0}))
    assert r.history[0].content == b"x" * 40 and r.report["cleared_tool_uses"] == 2
