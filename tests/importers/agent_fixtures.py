"""Small hand-made transcripts of the agents of issue 29, built in code (shapes from
`shared/transcript-formats-2.md`; no third-party file is copied). Each builder returns the
file's bytes; `FIXTURES` maps a fixture name to (builder, format, sessions, tool calls, tool
results, calls with recorded usage, recorded compactions)."""

from __future__ import annotations

import json
from collections.abc import Callable

from ctxsim.importers.archive import archive_bytes
from tests.importers.agent_fixtures_ide import (
    aider_history,
    cline_api,
    cline_api_alone,
    cline_folder,
    cline_native,
    cline_ui,
    opencode_db,
    opencode_export,
    opencode_storage,
    roo_folder,
)

__all__ = ["FIXTURES", "cline_api", "cline_ui", "opencode_db"]


def _json(value) -> bytes:
    return json.dumps(value, indent=2).encode()


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _parts(text):
    return [{"text": text}]


# -- Gemini CLI --------------------------------------------------------------------------------


def _call(call_id, name, args, output=None, error=None, status="success"):
    response = {"output": output} if error is None else {"error": error}
    return {"id": call_id, "name": name, "args": args, "status": status,
            "result": [{"functionResponse": {"id": call_id, "name": name,
                                             "response": response}}],
            "resultDisplay": output or error or "", "displayName": name}


def gemini_legacy() -> bytes:
    return _json({
        "sessionId": "453aa339-0000-4000-8000-000000000001", "projectHash": "cde65581",
        "startTime": "2025-10-29T10:37:00.099Z", "lastUpdated": "2025-10-29T10:37:13.195Z",
        "messages": [
            {"id": "u1", "timestamp": "2025-10-29T10:37:01Z", "type": "user",
             "content": "Change 'Hello' to 'Goodbye' in /tmp/greet.txt"},
            {"id": "g1", "type": "gemini", "content": "", "model": "gemini-2.5-pro",
             "thoughts": [{"subject": "Reading", "description": "read first"}],
             "tokens": {"input": 5367, "output": 26, "cached": 1000, "thoughts": 98, "tool": 0,
                        "total": 5491},
             "toolCalls": [_call("read_file-1", "read_file", {"absolute_path": "/tmp/greet.txt"},
                                 output="Hello from Gemini CLI"),
                           _call("glob-2", "glob", {"pattern": "*.md"}, error="no match",
                                 status="error")]},
            {"id": "i1", "type": "info", "content": "Request cancelled."},
            {"id": "g2", "type": "gemini", "content": _parts("Done: the file now says Goodbye."),
             "tokens": {"input": 5500, "output": 12, "cached": 5000, "thoughts": 0}},
        ]})


def gemini_jsonl() -> bytes:
    meta = {"sessionId": "0ab84937-0000-4000-8000-000000000002", "projectHash": "9da8b3df",
            "startTime": "2026-04-23T12:52:52.759Z", "lastUpdated": "2026-04-23T12:52:52.759Z",
            "kind": "main"}
    env = {"id": "env", "type": "user",
           "content": _parts("<session_context>cwd /w</session_context>")}
    ask = {"id": "u1", "type": "user", "content": _parts("List the files")}
    g1 = {"id": "g1", "type": "gemini", "content": _parts("Listing."),
          "tokens": {"input": 13906, "output": 185, "cached": 0},
          "model": "gemini-3-flash-preview"}
    g1_done = {**g1, "toolCalls": [_call("ls-1", "list_directory", {"path": "."}, output="a.py")]}
    g2 = {"id": "g2", "type": "gemini", "content": _parts("There is a.py."),
          "tokens": {"input": 14100, "output": 20, "cached": 13000}}
    wrong = {"id": "u2", "type": "user", "content": "oops"}
    wrong_answer = {"id": "g3", "type": "gemini", "content": "…",
                    "tokens": {"input": 1, "output": 1}}
    u3 = {"id": "u3", "type": "user", "content": "Now explain a.py"}
    notice = {"id": "i1", "type": "info", "content": "Context compressed from 71% to 12%."}
    snapshot = {"id": "s1", "type": "user", "content": _parts(
        "<state_snapshot>\n<overall_goal>list</overall_goal>\n</state_snapshot>")}
    ack = {"id": "a1", "type": "gemini",
           "content": _parts("Got it. Thanks for the additional context!")}
    g4 = {"id": "g4", "type": "gemini", "content": _parts("a.py prints hi."),
          "tokens": {"input": 3000, "output": 40, "cached": 0}}
    return _jsonl([meta, env, ask, g1, g1_done, {"$set": {"lastUpdated": "2026-04-23T12:53:02Z"}},
                   g2, wrong, wrong_answer, {"$rewindTo": "u2"}, u3, notice,
                   {"$set": {"messages": [env, snapshot, ack, u3]}}, g4])


# -- OpenHands V1 ------------------------------------------------------------------------------


def _event(kind, n, **fields):
    return {"kind": kind, "id": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": f"2025-10-30T03:50:{n:02d}.000000", **fields}


def _action(n, call_id, arguments, response_id, thought=()):
    return _event("ActionEvent", n, source="agent", thought=list(thought),
                  action={"kind": "ExecuteBashAction", "command": "ls"},
                  tool_name="execute_bash", tool_call_id=call_id,
                  tool_call={"id": call_id, "name": "execute_bash", "arguments": arguments},
                  llm_response_id=response_id)


def _openhands_events(with_prompt=True):
    events = []
    if with_prompt:
        events += [
            _event("SystemPromptEvent", 1, source="agent",
                   system_prompt={"type": "text", "text": "You are OpenHands."},
                   tools=[{"name": "execute_bash"}]),
            _event("MessageEvent", 2, source="user", llm_response_id=None,
                   llm_message={"role": "user",
                                "content": [{"type": "text", "text": "Count the files"}]}),
        ]
    events += [
        _action(3, "call_a", "{\"command\": \"ls\"}", "resp-1",
                [{"type": "text", "text": "Two looks."}]),
        _action(4, "call_b", "{\"command\": \"ls -a\"}", "resp-1"),
        _event("ObservationEvent", 5, source="environment", tool_name="execute_bash",
               tool_call_id="call_a", action_id="a",
               observation={"kind": "ExecuteBashObservation", "output": "a\nb", "error": False,
                            "metadata": {"exit_code": 0}}),
        _event("ObservationEvent", 6, source="environment", tool_name="execute_bash",
               tool_call_id="call_b",
               observation={"kind": "ExecuteBashObservation", "error": False,
                            "content": [{"type": "text", "text": ".\n..\na\nb"}]}),
        _event("Condensation", 7, source="environment",
               forgotten_event_ids=["00000000-0000-4000-8000-000000000003"],
               summary="The agent listed files.", summary_offset=2, llm_response_id="resp-c"),
        _action(8, "call_c", "{\"command\": 1}", "resp-2"),
        _event("AgentErrorEvent", 9, source="agent", tool_call_id="call_c",
               tool_name="execute_bash", error="command must be a string"),
        _event("ConversationStateUpdateEvent", 10, source="environment", key="agent_status",
               value="finished"),
        _event("MessageEvent", 11, source="agent", llm_response_id="resp-3",
               llm_message={"role": "assistant",
                            "content": [{"type": "text", "text": "There are 2 files."}]}),
    ]
    return events


def _usages():
    return [{"prompt_tokens": p, "completion_tokens": 10, "cache_read_tokens": c,
             "cache_write_tokens": 0, "response_id": r}
            for p, c, r in ((1200, 0, "resp-1"), (1500, 1000, "resp-2"), (1700, 1400, "resp-3"))]


def openhands_v1_dir() -> bytes:
    files = {"conv1/base_state.json": _json({
        "id": "conv1", "agent": {"llm": {"model": "claude-sonnet-4-5"},
                                  "condenser": {"kind": "LLMSummarizingCondenser", "max_size": 80}},
        "stats": {"usage_to_metrics": {"agent": {"token_usages": _usages()}}}})}
    for n, event in enumerate(_openhands_events()):
        files[f"conv1/events/event-{n:05d}-{event['id']}.json"] = _json(event)
    return archive_bytes(files)


def openhands_v1_jsonl() -> bytes:
    return _jsonl(_openhands_events())


def openhands_v1_cut() -> bytes:
    """A log cut after its start (shape of the SDK's own test fixture): an observation whose
    action is missing, and the usage in `stats` state updates."""
    stats = {"usage_to_metrics": {"default": {"token_usages": _usages()[:1]}}}
    return _jsonl([
        _event("ConversationStateUpdateEvent", 1, source="environment", key="stats",
               value={"usage_to_metrics": {}}),
        _action(3, "call_a", "{\"command\": \"ls\"}", "resp-1"),
        _event("ObservationEvent", 4, source="environment", tool_call_id="call_a",
               observation={"kind": "ExecuteBashObservation", "output": "a"}),
        _event("ObservationEvent", 5, source="environment", tool_call_id="call_gone",
               observation={"kind": "ExecuteBashObservation", "output": "b"}),
        _event("ConversationStateUpdateEvent", 6, source="environment", key="stats",
               value=stats),
    ])


def openhands_v1_eval() -> bytes:
    line = {"instance_id": "demo__demo-1", "instruction": "Count the files",
            "history": _openhands_events(with_prompt=False),
            "metadata": {"llm": {"model": "gpt-5"}, "sdk_version": "1.0.0"},
            "metrics": {"token_usages": _usages()}, "error": None, "test_result": {}}
    empty = {"instance_id": "demo__demo-2", "instruction": "Nothing", "history": [
        _event("MessageEvent", 1, source="agent", llm_message={
            "role": "assistant", "content": [{"type": "text", "text": "Cannot start."}]})]}
    return _jsonl([line, empty])


# -- codex exec --------------------------------------------------------------------------------

THREAD = "019a2d7a-6455-7170-a661-c6d8b94c630a"


def _item(event, n, kind, **fields):
    return {"type": f"item.{event}", "item": {"id": f"item_{n}", "type": kind, **fields}}


def _command(event, n, command, output="", code=None, status="completed"):
    return _item(event, n, "command_execution", command=command, aggregated_output=output,
                 exit_code=code, status=status)


def codex_exec_stream() -> bytes:
    return _jsonl([
        {"type": "thread.started", "thread_id": THREAD}, {"type": "turn.started"},
        _item("completed", 0, "reasoning", text="**Listing files**"),
        _command("started", 1, "bash -lc ls", status="in_progress"),
        _command("completed", 1, "bash -lc ls", "a.py\n", 0),
        _item("completed", 2, "agent_message", text="Files here: a.py"),
        {"type": "turn.completed",
         "usage": {"input_tokens": 6040, "cached_input_tokens": 4992, "output_tokens": 129}},
        {"type": "turn.started"},
        _command("started", 3, "cat a.py", status="in_progress"),
        _command("started", 4, "cat b.py", status="in_progress"),
        _command("completed", 3, "cat a.py", "print()", 0),
        _command("completed", 4, "cat b.py", "No such file", 1, "failed"),
        _item("completed", 5, "mcp_tool_call", server="docs", tool="search",
              arguments={"q": "print"}, status="completed",
              result={"content": [{"type": "text", "text": "print()"}]}),
        _item("completed", 6, "error", message="model rerouted"),
        _item("completed", 7, "agent_message", text="a.py prints a blank line."),
        {"type": "turn.completed",
         "usage": {"input_tokens": 20000, "cached_input_tokens": 15000, "output_tokens": 300}},
    ])


def codex_rollout() -> bytes:
    def line(kind, payload):
        return {"timestamp": "2025-11-17T21:30:28.664Z", "type": kind, "payload": payload}

    def usage(total, last):
        def counts(n):
            return {"input_tokens": n, "cached_input_tokens": 0, "output_tokens": 10,
                    "total_tokens": n + 10}
        return line("event_msg", {"type": "token_count", "info": {
            "total_token_usage": counts(total), "last_token_usage": counts(last),
            "model_context_window": 272000}})

    def message(role, kind, text):
        return line("response_item", {"type": "message", "role": role,
                                      "content": [{"type": kind, "text": text}]})
    return _jsonl([
        line("session_meta", {"id": THREAD, "originator": "codex_exec", "cli_version": "0.58.0",
                              "instructions": None, "source": "exec"}),
        line("turn_context", {"model": "gpt-5.1-codex"}),
        message("user", "input_text", "list the files"),
        line("event_msg", {"type": "user_message", "message": "list the files"}),
        line("response_item", {"type": "function_call", "name": "shell", "call_id": "call_1",
                               "arguments": "{\"command\":[\"bash\",\"-lc\",\"ls\"]}"}),
        usage(3000, 3000),
        line("response_item", {"type": "function_call_output", "call_id": "call_1",
                               "output": "a.py"}),
        message("assistant", "output_text", "Files here: a.py"),
        usage(6040, 3040),
    ])


def codex_exec_with_rollout() -> bytes:
    return archive_bytes({"stream.jsonl": codex_exec_stream(),
                          f"rollout-2025-11-17T15-30-28-{THREAD}.jsonl": codex_rollout()})


# -- mini-swe-agent ----------------------------------------------------------------------------


def mini_v1() -> bytes:
    usage = {"prompt_tokens": 1779, "completion_tokens": 212,
             "prompt_tokens_details": {"cached_tokens": 0}}
    return _json({
        "info": {"exit_status": "Submitted", "submission": "diff", "mini_version": "1.15.0",
                 "model_stats": {"instance_cost": 0.02, "api_calls": 3},
                 "config": {"agent": {"step_limit": 250}, "model": {"model_name": "gpt-5"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "<pr_description>Fix the bug</pr_description>"},
            {"role": "assistant", "content": "THOUGHT: look.\n\n```bash\nls -R\n```",
             "extra": {"response": {"usage": usage}}},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"},
            {"role": "assistant", "content": "```bash\nls\n```\nand\n```bash\npwd\n```"},
            {"role": "user",
             "content": "Please always provide EXACTLY ONE action in triple backticks."},
            {"role": "assistant",
             "content": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
            {"role": "user", "content": "diff --git a/a.py b/a.py"},
        ],
        "trajectory_format": "mini-swe-agent-1", "instance_id": "demo__demo-1"})


def mini_bare_v2_text() -> bytes:
    """The messages list saved alone (as mini-swe-agent's own test data is), with v2's
    ```mswea_bash_command blocks."""
    return _json([
        {"role": "system", "content": "Reply with exactly ONE bash code block."},
        {"role": "user", "content": "Please solve this issue: print hello"},
        {"role": "assistant", "content": "Try:\n\n```mswea_bash_command\necho hello\n```"},
        {"role": "user", "content": "<returncode>0</returncode>\n<output>\nhello\n</output>"},
        {"role": "assistant",
         "content": "```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        {"role": "user", "content": ""},
    ])


def mini_v2_toolcalls() -> bytes:
    def call(n, command):
        return {"id": f"call_{n}", "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
    return _json({
        "info": {"mini_version": "2.0.0", "exit_status": "Submitted",
                 "model_stats": {"instance_cost": 0.01, "api_calls": 2}},
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "Fix it"},
            {"role": "assistant", "content": "", "tool_calls": [call(1, "ls"), call(2, "pwd")],
             "extra": {"actions": [{"command": "ls"}, {"command": "pwd"}],
                       "response": {"usage": {"prompt_tokens": 900, "completion_tokens": 20}}}},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.py"},
            {"role": "tool", "tool_call_id": "call_2", "content": "/w"},
            {"role": "assistant", "content": "Done.", "reasoning_content": "Both ran: done.",
             "extra": {"response": {"usage": {"prompt_tokens": 1000, "completion_tokens": 5}}}},
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
        ],
        "trajectory_format": "mini-swe-agent-1.1"})


Builder = Callable[[], bytes]

# name: (builder, format, sessions, tool calls, tool results, calls with usage, compactions)
FIXTURES: dict[str, tuple[Builder, str, int, int, int, int, int]] = {
    "gemini-legacy.json": (gemini_legacy, "gemini-cli", 1, 2, 2, 2, 0),
    "gemini.jsonl": (gemini_jsonl, "gemini-cli-jsonl", 1, 1, 1, 3, 1),
    "openhands-v1-conversation.zip": (openhands_v1_dir, "openhands-v1", 1, 3, 3, 3, 1),
    "openhands-v1-events.jsonl": (openhands_v1_jsonl, "openhands-v1", 1, 3, 3, 0, 1),
    "openhands-v1-cut.jsonl": (openhands_v1_cut, "openhands-v1", 1, 1, 1, 1, 0),
    "openhands-v1-output.jsonl": (openhands_v1_eval, "openhands-v1-eval", 2, 3, 3, 3, 1),
    "codex-exec.jsonl": (codex_exec_stream, "codex-exec", 1, 4, 4, 0, 0),
    "codex-exec-with-rollout.zip": (codex_exec_with_rollout, "codex-exec", 1, 1, 1, 2, 0),
    "mini-v1.traj.json": (mini_v1, "mini-swe-agent", 1, 2, 2, 1, 0),
    "mini-v2.traj.json": (mini_v2_toolcalls, "mini-swe-agent", 1, 2, 2, 2, 0),
    "mini-bare.traj.json": (mini_bare_v2_text, "mini-swe-agent", 1, 2, 2, 0, 0),
    "cline-task.zip": (cline_folder, "cline", 1, 3, 2, 3, 1),
    "api_conversation_history.json": (cline_api_alone, "cline", 1, 3, 2, 0, 0),
    "cline-native.json": (cline_native, "cline", 1, 3, 2, 2, 0),
    "roo-task.zip": (roo_folder, "roo-code", 1, 2, 2, 2, 1),
    ".aider.chat.history.md": (aider_history, "aider", 2, 0, 0, 3, 0),
    "opencode-export.json": (opencode_export, "opencode", 1, 2, 2, 4, 1),
    "opencode-storage.zip": (opencode_storage, "opencode", 1, 2, 2, 4, 1),
}
