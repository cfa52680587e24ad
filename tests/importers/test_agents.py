"""Importers of issue 29 (Gemini CLI, OpenHands V1, codex exec, mini-swe-agent, Cline, Roo Code,
Aider, OpenCode): counts, recorded usage, recorded compactions, versions, archives, the one
clear line for a near-format file, the short unknown-format line, and real transcripts in
`../shared/transcripts` when present."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest

from ctxsim.importers import TranscriptError, aider, detect, gemini_cli, load
from ctxsim.importers.archive import archive_bytes
from ctxsim.importers.cline_common import metrics_usage
from tests.importers import agent_fixtures as af
from tests.importers import agent_fixtures_ide as af_ide
from tests.shared import SHARED_DIR

SAMPLES = SHARED_DIR / "transcripts"


def _load(name: str, tmp_path):
    builder = af.FIXTURES[name][0]
    path = tmp_path / name
    path.write_bytes(builder())
    return load(path)


def _counts(result):
    sessions = result.sessions
    return (result.format, len(sessions), sum(s.tool_call_count for s in sessions),
            sum(s.tool_result_count for s in sessions),
            sum(1 for s in sessions for m in s.messages
                if m.role == "assistant" and m.meta.get("recorded")),
            sum(len(s.meta.get("recorded_compactions", ())) for s in sessions))


@pytest.mark.parametrize("name", sorted(af.FIXTURES))
def test_each_agent_fixture_gives_its_sessions_calls_results_usage_and_compactions(name, tmp_path):
    _, *expected = af.FIXTURES[name]
    result = _load(name, tmp_path)
    assert _counts(result) == tuple(expected)
    for session in result.sessions:
        seen: set[str] = set()
        for message in session.messages:
            seen.update(call.id for call in message.tool_calls)
            if message.role == "tool":
                assert message.tool_call_id in seen, (name, message.tool_call_id)


def test_the_opencode_sqlite_database_imports_like_its_export(tmp_path):
    path = tmp_path / "opencode.db"
    af.opencode_db(path)
    result = load(path)
    export = _load("opencode-export.json", tmp_path)
    assert _counts(result) == _counts(export)
    assert result.sessions[0].meta["agent_version"] == "1.2.0"
    assert [m.text for m in result.sessions[0].messages] == \
        [m.text for m in export.sessions[0].messages]


def test_a_damaged_opencode_database_gets_one_line(tmp_path):
    data = af.opencode_db(tmp_path / "opencode.db")
    with pytest.raises(TranscriptError) as caught:
        load(io.BytesIO(data[:100] + b"\x00" * 4000))
    assert str(caught.value).startswith("unknown transcript format: closest is opencode, but "
                                        "the SQLite database cannot be read")
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE notes (text)")
    db.commit()
    db.close()
    with pytest.raises(TranscriptError, match="without the table.s. message, part, session"):
        load(other)


def test_a_folder_is_read_like_its_zip(tmp_path):
    task = tmp_path / "tasks" / "1758845000000"
    task.mkdir(parents=True)
    (task / "api_conversation_history.json").write_text(json.dumps(af.cline_api()))
    (task / "ui_messages.json").write_text(json.dumps(af.cline_ui()))
    assert _counts(load(task)) == _counts(_load("cline-task.zip", tmp_path))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    with pytest.raises(TranscriptError, match="this folder is not a transcript folder"):
        load(tmp_path / "notes")


def test_the_same_files_upload_as_a_stream(tmp_path):
    result = load(io.BytesIO(af.opencode_storage()))
    assert result.format == "opencode" and len(result.sessions) == 1


# -- per-format details ------------------------------------------------------------------------


def test_gemini_legacy_splits_each_tool_call_into_call_and_result_with_usage(tmp_path):
    (session,) = _load("gemini-legacy.json", tmp_path).sessions
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant"]
    first = session.messages[1]
    assert [c.name for c in first.tool_calls] == ["read_file", "glob"]
    assert first.meta["recorded"] == {"total_input": 5367, "input": 4367, "cache_read": 1000,
                                      "cache_write": None, "output": 26, "reasoning": 98}
    assert session.messages[2].text == "Hello from Gemini CLI"
    assert session.messages[3].is_error and session.messages[3].text == "no match"
    assert session.meta["started"] == "2025-10-29T10:37:00.099Z"
    assert gemini_cli.recorded_tokens({"input": 0, "output": 3}) is None


def test_gemini_jsonl_replays_updates_rewinds_and_keeps_the_recorded_compression(tmp_path):
    (session,) = _load("gemini.jsonl", tmp_path).sessions
    texts = [m.text for m in session.messages]
    assert "oops" not in texts  # rewound
    assert texts.count("Now explain a.py") == 1  # the kept tail is not repeated
    summary = next(m for m in session.messages if "<state_snapshot>" in m.text)
    assert summary.role == "user"
    marker = summary.meta["compaction"]
    assert marker["source"] == "gemini-cli" and marker["kind"] == "summary"
    assert marker["pre_tokens"] == 14100
    assert marker["notice"] == "Context compressed from 71% to 12%."
    assert marker["preserved_ids"] == ["u3"] and marker["kept"] == 1
    ack = session.messages[session.messages.index(summary) + 1]
    assert ack.meta["compaction_ack"] and "recorded" not in ack.meta
    assert session.messages[2].tool_calls[0].id == "ls-1"  # the update added the call
    (entry,) = session.meta["recorded_compactions"]
    assert entry["source"] == "gemini-cli" and entry["summary_present"] is True


def test_openhands_v1_groups_parallel_actions_and_marks_the_condensation(tmp_path):
    (session,) = _load("openhands-v1-conversation.zip", tmp_path).sessions
    assert session.messages[0].role == "system" and session.tools == [{"name": "execute_bash"}]
    parallel = session.messages[2]
    assert [c.id for c in parallel.tool_calls] == ["call_a", "call_b"]
    assert parallel.text == "Two looks." and parallel.meta["recorded"]["total_input"] == 1200
    assert parallel.meta["call_event_ids"][0].endswith("000000000003")
    marked = next(m for m in session.messages if "openhands_condensation" in m.meta)
    assert marked.meta["openhands_condensation"]["summary"] == "The agent listed files."
    error = next(m for m in session.messages if m.tool_call_id == "call_c")
    assert error.is_error and error.text == "command must be a string"
    assert session.meta["model"] == "claude-sonnet-4-5"
    assert session.meta["condenser"]["max_size"] == 80


def test_openhands_v1_cut_log_keeps_an_orphan_result_as_a_user_message(tmp_path):
    result = _load("openhands-v1-cut.jsonl", tmp_path)
    (session,) = result.sessions
    orphan = next(m for m in session.messages if m.meta.get("orphan_result"))
    assert orphan.role == "user" and orphan.text == "b"
    assert any("not in the log" in w for w in result.warnings)
    assert session.messages[0].meta["recorded"]["total_input"] == 1200  # from `stats`


def test_openhands_v1_observations_read_as_the_sdk_sends_them(tmp_path):
    """A terminal's output between its PS1 `prefix` and `suffix`, then the working directory,
    interpreter and exit code; `is_error` (current SDK) and a terminal's `error` (2025) flag the
    result and put their header first, as `to_llm_content` does."""
    metadata = {"exit_code": 0, "working_dir": "/w", "py_interpreter_path": "/w/.venv/bin/python",
                "prefix": "", "suffix": "\n[The command completed with exit code 0.]"}
    observations = [
        {"kind": "TerminalObservation", "content": [{"type": "text", "text": "ok"}],
         "is_error": False, "metadata": metadata},
        {"kind": "TerminalObservation", "content": [{"type": "text", "text": "two commands"}],
         "is_error": True, "metadata": {**metadata, "exit_code": -1, "suffix": ""}},
        {"kind": "ExecuteBashObservation", "output": "boom", "error": True,
         "metadata": {"exit_code": 2, "prefix": "", "suffix": ""}},
        {"kind": "FileEditorObservation", "content": [{"type": "text", "text": "no file"}],
         "is_error": True},
    ]
    events = [af._event("MessageEvent", 1, source="user", llm_message={
        "role": "user", "content": [{"type": "text", "text": "go"}]})]
    for n, observation in enumerate(observations):
        events += [af._action(10 + 2 * n, f"c{n}", "{}", f"r{n}"),
                   af._event("ObservationEvent", 11 + 2 * n, source="environment",
                             tool_call_id=f"c{n}", observation=observation)]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(json.dumps(e).encode() for e in events))
    (session,) = load(path).sessions
    results = [m for m in session.messages if m.role == "tool"]
    assert [m.text for m in results] == [
        "ok\n[The command completed with exit code 0.]\n[Current working directory: /w]"
        "\n[Python interpreter: /w/.venv/bin/python]\n[Command finished with exit code 0]",
        "[An error occurred during execution.]\ntwo commands\n[Current working directory: /w]"
        "\n[Python interpreter: /w/.venv/bin/python]",
        "[There was an error during command execution.]\nboom"
        "\n[Command finished with exit code 2]",
        "[An error occurred during execution.]\nno file"]
    assert [m.is_error for m in results] == [False, True, True, True]


def test_openhands_v1_eval_leads_with_the_instruction_and_keeps_the_sdk_version(tmp_path):
    first, second = _load("openhands-v1-output.jsonl", tmp_path).sessions
    assert first.messages[0].role == "user" and first.messages[0].text == "Count the files"
    assert first.meta["agent_version"] == "1.0.0" and first.title.startswith("demo__demo-1: ")
    assert second.tool_call_count == 0


def test_codex_exec_infers_model_calls_and_keeps_the_running_total_off_the_calls(tmp_path):
    result = _load("codex-exec.jsonl", tmp_path)
    (session,) = result.sessions
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "assistant",
                     "user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    assert session.messages[0].meta["prompt_not_recorded"]
    parallel = session.messages[5]
    assert len(parallel.tool_calls) == 2 and session.messages[7].is_error
    assert session.messages[8].tool_calls[0].name == "docs__search"
    assert session.meta["thread_usage"]["input_tokens"] == 20000
    assert not any(m.meta.get("recorded") for m in session.messages)
    assert any("model rerouted" in w for w in result.warnings)


def test_codex_exec_with_its_rollout_takes_the_rollouts_messages_usage_and_version(tmp_path):
    (session,) = _load("codex-exec-with-rollout.zip", tmp_path).sessions
    assert session.format == "codex-exec" and session.meta["cli_version"] == "0.58.0"
    assert session.meta["exec_stream"] == {"tool_calls": 4, "tool_results": 4}
    assert session.messages[0].text == "list the files"
    assert [m.meta["recorded"]["total_input"] for m in session.messages
            if m.role == "assistant"] == [3000, 3040]


def test_codex_exec_run_that_failed_before_any_item_says_why():
    api_error = json.dumps({"type": "error", "error": {
        "type": "invalid_request_error", "code": "invalid_json_schema",
        "message": "Invalid schema for response_format 'out': 'uniqueItems' is not permitted."},
        "status": 400}, indent=2)
    stream = [{"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
              {"type": "error", "message": api_error},
              {"type": "turn.failed", "error": {"message": api_error}}]
    with pytest.raises(TranscriptError) as caught:
        load(io.BytesIO("\n".join(json.dumps(r) for r in stream).encode()))
    assert str(caught.value).endswith("the run failed before the model answered: Invalid schema "
                                      "for response_format 'out': 'uniqueItems' is not permitted.")


def test_mini_swe_agent_actions_are_tool_calls_never_plain_chat(tmp_path):
    (session,) = _load("mini-v1.traj.json", tmp_path).sessions
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user", "assistant",
                     "tool"]
    assert json.loads(session.messages[2].tool_calls[0].arguments) == {"command": "ls -R"}
    assert session.messages[4].tool_calls == ()  # two blocks: the agent refused it
    assert session.meta["agent_version"] == "1.15.0"
    assert session.meta["model_stats"]["api_calls"] == 3
    assert session.messages[2].meta["recorded"]["total_input"] == 1779


def test_mini_swe_agent_v2_keeps_a_reasoning_models_thinking_beside_the_reply(tmp_path):
    (session,) = _load("mini-v2.traj.json", tmp_path).sessions
    done = session.messages[-1]
    assert done.text == "Done." and done.meta["reasoning"] == "Both ran: done."


def test_cline_xml_calls_results_usage_and_deleted_range(tmp_path):
    (session,) = _load("cline-task.zip", tmp_path).sessions
    assert session.format == "cline" and session.key == "1758845000000"
    assert session.title == "Read a.py"
    read, command, done = [m for m in session.messages if m.role == "assistant"]
    assert read.tool_calls[0].name == "read_file"
    assert json.loads(read.tool_calls[0].arguments) == {"path": "a.py"}
    denied = next(m for m in session.messages if m.tool_call_id == command.tool_calls[0].id)
    assert denied.is_error
    # Cline's tokensIn excludes the cache: the context is the sum.
    assert read.meta["recorded"]["total_input"] == 3 + 9000 + 500
    assert done.meta["recorded"]["total_input"] == 2 + 9600
    assert session.meta["deleted_range"] == [2, 3]
    assert session.meta["started"] == "1970-01-01T00:00:01.000Z"  # the first message's ts (ms)
    # The range is recorded on the first history message written after it (ts 3600 → 4000).
    assert done.meta["compaction"] == {"source": "cline", "kind": "truncation",
                                       "deleted_range": [2, 3]}


def test_cline_native_calls_answered_in_text_blocks_with_usage_on_the_message(tmp_path):
    (session,) = _load("cline-native.json", tmp_path).sessions
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "user"]
    search, read = session.messages[2:4]
    assert search.tool_call_id == "tooluse_1" and search.text.startswith("[search_files for")
    assert read.tool_call_id == "tooluse_2" and "TODO LIST" in read.text
    assert session.messages[1].meta["recorded"] == {
        "total_input": 10049, "input": 1049, "cache_read": 9000, "cache_write": None,
        "output": 640, "reasoning": None}
    assert session.messages[1].meta["model"] == "claude_4_5_opus"
    assert session.messages[5].text.startswith("[TASK RESUMPTION]")  # no result: a user turn


def test_cline_message_metrics_add_the_cache_where_the_provider_leaves_it_out():
    """`metrics.tokens.prompt` is the provider's `inputTokens`: Anthropic's leaves the cache
    out (a public task: prompt 10, cached 9,573), a generic OpenAI-compatible one holds it."""
    def usage(provider, prompt, cached):
        return metrics_usage({"modelInfo": {"providerId": provider} if provider else {},
                               "metrics": {"tokens": {"prompt": prompt, "completion": 5,
                                                      "cached": cached}}})
    apart = usage("anthropic", 12000, 9000)
    assert (apart["total_input"], apart["input"], apart["cache_read"]) == (21000, 12000, None)
    assert usage(None, 10, 9573)["total_input"] == 9583  # more cached than prompt: apart
    held = usage("openai", 11000, 10000)
    assert (held["total_input"], held["input"], held["cache_read"]) == (11000, 1000, 10000)


def test_roo_before_3_30_keeps_its_last_summary_with_the_last_condense_and_no_usage():
    """Before 3.30 a condense deleted what it replaced, the previous summary included: the
    history's summary (an assistant message at index 1, with the timestamp of the first
    message it kept) is the last `condense_context`'s, and no response of its own."""
    api = [{"role": "user", "ts": 10, "content": af_ide._text("<task>\nFix\n</task>",
                                                              af_ide.ROO_ENV)},
           {"role": "assistant", "ts": 300, "isSummary": True,
            "content": af_ide._text("## Summary\nThe second condense.")},
           {"role": "user", "ts": 300, "content": af_ide._text("Go on.", af_ide.ROO_ENV)},
           {"role": "assistant", "ts": 320, "content": af_ide._text(
               "<attempt_completion>\n<result>Done.</result>\n</attempt_completion>")}]
    ui = [af_ide._request(20, 150000, 10, 0, 0),
          {"ts": 100, "type": "say", "say": "condense_context", "contextCondense": {
              "prevContextTokens": 168575, "newContextTokens": 114453}},
          {"ts": 250, "type": "say", "say": "condense_context", "contextCondense": {
              "prevContextTokens": 146958, "newContextTokens": 76206}},
          af_ide._request(290, 80000, 10, 0, 0)]
    (session,) = load(io.BytesIO(archive_bytes({
        "t/api_conversation_history.json": json.dumps(api).encode(),
        "t/ui_messages.json": json.dumps(ui).encode()}))).sessions
    summary, reply = session.messages[1], session.messages[3]
    assert (summary.meta["compaction"]["pre_tokens"],
            summary.meta["compaction"]["post_tokens"]) == (146958, 76206)
    assert "recorded" not in summary.meta
    assert reply.meta["recorded"]["total_input"] == 80000


def test_cline_results_as_public_tasks_write_them(tmp_path):
    """Seen in public Cline and Roo tasks: an extra call of a message answered by Cline's
    "Tool [x] was not executed" block; a tool's own output printing "[ERROR]" is no error
    (only a block starting with Cline's error or denial words is); Roo's headers without
    " for " (`[switch_mode to …]`, `[new_task in … mode: …]`) still answer their call; thinking
    blocks kept as the Anthropic importers keep them."""
    refused = ("Tool [read_file] was not executed because a tool has already been used in this "
               "message. Only one tool may be used per message.")
    history = [
        {"role": "user", "content": af_ide._text("<task>\nRead\n</task>", af_ide.ENV)},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Two files to read.", "signature": "sig"},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
            {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b"}}]},
        {"role": "user", "content": af_ide._text(
            "[read_file for 'a'] Result:\nlog: [ERROR] ❌ length 14", refused, af_ide.ENV)},
        {"role": "assistant", "content": af_ide._text(
            "<switch_mode>\n<mode_slug>code</mode_slug>\n</switch_mode>")},
        {"role": "user", "content": af_ide._text(
            "[switch_mode to 'code' because: the plan is done] Result:",
            "The user denied this operation.", af_ide.ENV)},
        {"role": "assistant", "content": af_ide._text(
            "<new_task>\n<mode>debug</mode>\n<message>Fix it</message>\n</new_task>")},
        {"role": "user", "content": af_ide._text(
            "[new_task in 🪲 Debug mode: 'Fix it'] Result:", "Successfully created new task.",
            af_ide.ENV)},
    ]
    path = tmp_path / "api_conversation_history.json"
    path.write_text(json.dumps(history))
    (session,) = load(path).sessions
    results = {m.tool_call_id: m for m in session.messages if m.role == "tool"}
    calls = [c for m in session.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["read_file", "read_file", "switch_mode", "new_task"]
    assert all(c.id in results for c in calls)
    assert [results[c.id].is_error for c in calls] == [False, True, True, False]
    assert results["t2"].text.startswith(refused)  # the environment details follow it
    assert session.messages[1].meta["thinking"] == ["Two files to read."]


def test_roo_code_is_told_from_cline_and_keeps_its_condensed_summary(tmp_path):
    (session,) = _load("roo-task.zip", tmp_path).sessions
    assert session.format == "roo-code"
    summary = next(m for m in session.messages if m.meta.get("compaction"))
    assert summary.meta["compaction"] == {"source": "roo-code", "kind": "summary",
                                          "condense_id": "c1", "pre_tokens": 150000,
                                          "post_tokens": 9000}
    assert session.messages[0].meta["condense_parent"] == "c1"
    first, second = [m for m in session.messages if m.role == "assistant"]
    assert first.meta["recorded"]["total_input"] == 2000  # anthropic, tokensIn ≥ cache
    assert second.meta["recorded"]["total_input"] == 9200  # openai protocol: includes cache
    assert session.messages[-1].is_error


def test_aider_splits_sessions_at_each_start_and_reads_the_tokens_lines(tmp_path):
    result = _load(".aider.chat.history.md", tmp_path)
    first, second = result.sessions
    assert [m.role for m in first.messages] == ["user", "assistant", "user", "assistant"]
    assert first.messages[0].text == "add a comment at the top of a.py\nthat says hello"
    assert first.messages[1].meta["recorded"] == {
        "total_input": 3200, "input": 2200, "cache_read": 1000, "cache_write": None,
        "output": 21, "reasoning": None}
    assert first.messages[1].meta["aider_output"][-1] == "Applied edit to a.py"
    assert first.messages[2].meta["aider_command"] == "/ask"
    assert first.messages[3].meta["recorded"]["total_input"] == 12000
    assert first.meta["agent_version"] == "0.85.1" and first.meta["model"] == "gpt-4o"
    assert second.meta["agent_version"] == "0.86.0"
    assert second.messages[1].meta["recorded"]["total_input"] == 1234
    assert any("without a model reply" in w for w in result.warnings)


def test_aider_status_messages_of_several_lines_stay_aider_output(tmp_path):
    """Aider writes "> " on a status message's first line only and two trailing spaces after
    its last (public histories: SEARCH/REPLACE failures, commit messages, /map): the lines
    between are not the model's reply. 0.48's banner says `Models:`."""
    path = tmp_path / ".aider.chat.history.md"
    path.write_text(
        "\n# aider chat started at 2024-08-01 10:00:00\n\n"
        "> Aider v0.48.1  \n"
        "> Models: claude-3-5-sonnet-20240620 with diff edit format, weak model claude-3-haiku"
        "  \n\n"
        "#### fix a.py  \n\n"
        "a.py\n```\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1,200 sent, 30 received.  \n"
        "> # 1 SEARCH/REPLACE block failed to match!\n\n"
        "## SearchReplaceNoExactMatch: a.py\n<<<<<<< SEARCH\nx\n\n"
        "The SEARCH section must exactly match an existing block of lines  \n\n"
        "a.py\n```\n<<<<<<< SEARCH\nz\n=======\ny\n>>>>>>> REPLACE\n```\n\n"
        "> Tokens: 1,400 sent, 31 received.  \n")
    (session,) = load(path).sessions
    assert [m.role for m in session.messages] == ["user", "assistant", "assistant"]
    failed = session.messages[1].meta["aider_output"][-1]
    assert failed.startswith("# 1 SEARCH/REPLACE block failed") and failed.endswith(
        "existing block of lines") and "## SearchReplaceNoExactMatch" in failed
    assert session.messages[2].text.startswith("a.py\n```\n<<<<<<< SEARCH\nz")
    assert session.messages[2].meta["recorded"]["total_input"] == 1400
    assert (session.meta["model"], session.meta["edit_format"]) == (
        "claude-3-5-sonnet-20240620", "diff")


def test_aider_reads_every_wording_of_its_tokens_line():
    assert aider.usage_of("Tokens: 21,539 sent, 320 cached, 9 received. Cost: $0.0030 message")[
        "cache_read"] == 320
    full = aider.usage_of("Tokens: 3.2k sent, 1.0k cache write, 2.0k cache hit, 21 received.")
    assert (full["total_input"], full["cache_write"], full["cache_read"], full["input"]) == (
        3200, 1000, 2000, 200)
    assert aider.usage_of("Applied edit to a.py") is None


def test_opencode_2025_sessions_keep_their_system_prompt_and_openai_style_usage(tmp_path):
    """A public 2025 OpenCode response (grok-code through OpenCode's own provider): the
    assistant message records the system prompt it sent, and `tokens.input` 9,640 with 9,600
    read is the whole prompt (OpenCode stored OpenAI-style `inputTokens` as given until
    anomalyco/opencode#4256, 2025-11-12); Anthropic's, and everyone's since, leave it out."""
    def export(created, provider, model):
        assistant = {"id": "msg_2", "sessionID": "ses_1", "role": "assistant",
                     "providerID": provider, "modelID": model, "time": {"created": created},
                     "system": ["You are opencode.", "Env: linux"],
                     "tokens": {"input": 9640, "output": 12, "reasoning": 0,
                                "cache": {"read": 9600, "write": 0}}}
        return json.dumps({"info": {"id": "ses_1", "time": {"created": created}}, "messages": [
            {"info": {"id": "msg_1", "sessionID": "ses_1", "role": "user",
                      "time": {"created": created}},
             "parts": [{"id": "prt_1", "type": "text", "text": "pwd"}]},
            {"info": assistant, "parts": [{"id": "prt_2", "type": "text", "text": "/w"}]}]})
    september, december = 1_758_069_899_229, 1_765_000_000_000
    totals = {}
    for name, args in {"openai-style 2025": (september, "opencode", "grok-code"),
                       "anthropic 2025": (september, "anthropic", "claude-sonnet-4"),
                       "openai-style later": (december, "opencode", "grok-code")}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(export(*args))
        (session,) = load(path).sessions
        totals[name] = session.messages[-1].meta["recorded"]["total_input"]
        assert [m.text for m in session.messages if m.role == "system"] == [
            "You are opencode.", "Env: linux"]
    assert totals == {"openai-style 2025": 9640, "anthropic 2025": 19240,
                      "openai-style later": 19240}


def test_opencode_splits_steps_into_calls_and_marks_compaction_and_pruning(tmp_path):
    (session,) = _load("opencode-export.json", tmp_path).sessions
    roles = [m.role for m in session.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user",
                     "assistant"]
    assert session.messages[1].meta["recorded"]["total_input"] == 9640 + 9600
    assert session.messages[2].meta["opencode_pruned"] == 5
    assert session.messages[4].is_error and session.messages[4].text == "not found"
    assert session.messages[6].text == "What did we do so far?"
    marker = session.messages[7].meta["compaction"]
    assert marker["source"] == "opencode" and marker["trigger"] == "auto"
    assert marker["pre_tokens"] == 2 + 9650 + 30
    assert session.meta["agent_version"] == "1.0.107" and session.title == "List files"
    assert session.meta["started"] == "1970-01-01T00:00:00.001Z"


# -- detection and errors ----------------------------------------------------------------------


def test_unknown_format_is_one_short_line_naming_the_closest_with_details(tmp_path):
    path = tmp_path / "near.json"
    path.write_text(json.dumps({"info": {"id": "ses_1", "title": "t"}, "parts": []}))
    with pytest.raises(TranscriptError) as caught:
        detect(path)
    error = caught.value
    assert str(error) == ("unknown transcript format: closest is opencode, but `info.id` is an "
                          "OpenCode session id but there is no `messages` list")
    assert len(str(error)) < 160
    assert len(error.details) >= 20 and any(d.startswith("gemini-cli: ") for d in error.details)


def test_unknown_format_without_a_near_miss_describes_the_shape(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"hello": 1, "world": 2}))
    with pytest.raises(TranscriptError) as caught:
        load(path)
    assert str(caught.value).startswith("unknown transcript format: a JSON object with "
                                        "`hello`, `world` matches none of the ")
    assert caught.value.details


NEAR_MISSES = {
    # a broken file close to a format: (content, the one line expected)
    "ui-only.json": (json.dumps(af.cline_ui()), "closest is cline, but this is a task's "
                     "ui_messages.json alone"),
    "aider-no-header.md": ("#### hi\n\nHello\n\n> Tokens: 10 sent, 2 received.\n",
                           "closest is aider, but there are `####` input"),
    "exec-torn-head.jsonl": (json.dumps({"type": "item.completed", "item": {"id": "item_0"}})
                             + "\n" + json.dumps({"type": "turn.completed"}) + "\n",
                             "closest is codex-exec, but item events are there"),
    "opencode-no-messages.json": (json.dumps({"info": {"id": "ses_1"}}),
                                  "closest is opencode, but `info.id` is an OpenCode session id"),
    "gemini-no-hash.json": (json.dumps({"sessionId": "s", "messages": [
        {"id": "u", "type": "user", "content": "hi"}]}),
                            "closest is gemini-cli, but the object has `sessionId`"),
    "gemini-headless.json": (json.dumps({"session_id": "s", "error": {"message": "no auth"}}),
                             "closest is gemini-cli, but this is `gemini -p` output (json)"),
    "gemini-stream.jsonl": ("\n".join(json.dumps(r) for r in (
        {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"},
        {"type": "message", "role": "user", "content": "hi"})) + "\n",
                            "closest is gemini-cli-jsonl, but this is `gemini -p` output "
                            "(stream-json)"),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_a_file_close_to_a_format_gets_one_line_saying_what_is_wrong(name, tmp_path):
    content, expected = NEAR_MISSES[name]
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TranscriptError) as caught:
        load(path)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


BROKEN = {
    # the format is recognised, the structure is wrong: the line says what and where
    "gemini-cli": (lambda: json.dumps({"sessionId": "s", "projectHash": "h", "messages": [
        {"id": "g", "type": "gemini", "toolCalls": "none"}]}), "`messages[0].toolCalls` should "
                   "be a list"),
    "gemini-cli-jsonl": (lambda: json.dumps({"sessionId": "s", "projectHash": "h"}) + "\n"
                         + json.dumps({"hello": 1}) + "\n",
                         "line 2: Gemini CLI: a line should be a message record"),
    "mini-swe-agent": (lambda: json.dumps({"trajectory_format": "mini-swe-agent-1",
                                           "messages": {"role": "user"}}),
                       "`messages` should be a list"),
    "opencode": (lambda: json.dumps({"info": {"id": "ses_1"}, "messages": [
        {"info": {"id": "msg_1", "role": "robot"}, "parts": []}]}), "`role` should be user or "
                 "assistant, not 'robot'"),
    "openhands-v1-eval": (lambda: json.dumps({"instance_id": "i", "history": [
        {"kind": "MessageEvent", "id": "e", "llm_message": "hi"}]}) + "\n",
                          "line 1: OpenHands V1: `history[0].llm_message` should be an object"),
}


@pytest.mark.parametrize("format_name", sorted(BROKEN))
def test_a_broken_file_of_a_known_format_names_the_field(format_name):
    build, expected = BROKEN[format_name]
    with pytest.raises(TranscriptError) as caught:
        load(io.BytesIO(build().encode()))
    assert expected in str(caught.value), str(caught.value)


def test_an_archived_task_chat_log_without_its_history_says_what_to_include():
    data = archive_bytes({"1758845000000/ui_messages.json": json.dumps(af_ide.cline_ui())
                          .encode()})
    with pytest.raises(TranscriptError) as caught:
        load(io.BytesIO(data))
    assert str(caught.value).startswith("unknown transcript format: closest is cline, but the "
                                        "archive has a task's ui_messages.json but no "
                                        "api_conversation_history.json")


def test_an_unknown_archive_says_what_it_is_with_every_reason_in_the_details():
    data = archive_bytes({"notes.txt": b"hello"})
    with pytest.raises(TranscriptError) as caught:
        load(io.BytesIO(data))
    assert str(caught.value).startswith("this ZIP archive holds nothing ctxsim reads")
    assert any(d.startswith("cline: ") for d in caught.value.details)


def test_mini_swe_agent_is_detected_before_openai_chat(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(af.mini_v1())
    assert detect(path) == "mini-swe-agent"
    # A trajectory without `trajectory_format` (older releases [X]) is still recognised.
    document = json.loads(af.mini_v1())
    del document["trajectory_format"]
    path.write_text(json.dumps(document))
    assert detect(path) == "mini-swe-agent"


# -- real transcripts (../shared/transcripts) --------------------------------------------------

AGENT_FOLDERS = {
    "gemini-cli": ("gemini-cli", "gemini-cli-jsonl"), "openhands-v1": ("openhands-v1",
                                                                      "openhands-v1-eval"),
    "codex-exec": ("codex-exec",), "mini-swe-agent": ("mini-swe-agent",),
    "cline": ("cline",), "roo-code": ("roo-code", "cline"), "aider": ("aider",),
    "opencode": ("opencode",),
}


# Files that are part of a folder transcript, never a transcript alone.
FOLDER_PARTS = ("ui_messages.json", "task_metadata.json", "context_history.json",
                "base_state.json")


def _folder_transcript(directory):
    """A directory that is one multi-file transcript (a Cline / Roo Code task, an OpenHands V1
    conversation, OpenCode storage), or None."""
    names = {p.name for p in directory.iterdir()}
    if "api_conversation_history.json" in names or "events" in names or "storage" in names \
            or any(n.startswith("ses_") for n in names):
        return directory
    return None


def _real_files():
    """Every transcript of the issue-29 agents under ../shared/transcripts/<agent>*/: single
    files, and folders (zipped here, as a user would upload them)."""
    found = []
    for folder, formats in AGENT_FOLDERS.items():
        for top in sorted(SAMPLES.glob(f"{folder}*")) if SAMPLES.is_dir() else ():
            if not top.is_dir():
                continue
            folders = sorted({d for d in top.rglob("*") if d.is_dir() and _folder_transcript(d)})
            for path in sorted(top.rglob("*")):
                if any(d == path or d in path.parents for d in folders):
                    continue
                if path.is_file() and path.name not in FOLDER_PARTS and path.suffix != ".md" \
                        or path.is_file() and path.name.endswith(".aider.chat.history.md"):
                    found.append(pytest.param(path, formats,
                                              id=str(path.relative_to(SAMPLES))))
            found += [pytest.param(d, formats, id=str(d.relative_to(SAMPLES))) for d in folders]
    if not found:
        return [pytest.param(None, None, marks=pytest.mark.skip(
            reason=f"no transcripts of the issue-29 agents under {SAMPLES} (folders "
                   f"{', '.join(AGENT_FOLDERS)}*)"), id="none-present")]
    return found


@pytest.mark.shared
@pytest.mark.parametrize(("path", "formats"), _real_files())
def test_real_transcripts_of_the_new_agents_import_as_their_agent_never_as_a_plain_chat(
        path, formats):
    result = load(path)  # a folder is read as the zip of its files
    assert result.format in formats
    expected = SAMPLES / "expected-counts.json"
    relative = str(path.relative_to(SAMPLES))
    counts = json.loads(expected.read_text()).get(relative) if expected.is_file() else None
    if counts is not None:
        assert {"sessions": len(result.sessions),
                "tool_calls": sum(s.tool_call_count for s in result.sessions),
                "tool_results": sum(s.tool_result_count for s in result.sessions)} == counts
    if result.format != "aider":
        assert sum(s.tool_call_count for s in result.sessions) > 0


def test_gemini_parallel_calls_take_only_their_own_response_from_a_batch_result(tmp_path):
    """A 2026 session recorded the whole batch's responses in each call's `result`: each call
    keeps its own (by `functionResponse.id`) and the text parts after it, is an error only by
    its own response, and keeps both `output` and `error` when a response has both."""
    def response(call_id, **body):
        return {"functionResponse": {"id": call_id, "name": call_id.split("-")[0],
                                     "response": body}}
    batch = [response("read-1", output="file text"), {"text": "--- extra file ---"},
             response("shell-2", error="[Operation Cancelled] denied"),
             response("agent-3", output="finished", error="cancelled by user")]
    calls = [{"id": i, "name": i.split("-")[0], "args": {}, "status": s, "result": batch}
             for i, s in (("read-1", "success"), ("shell-2", "cancelled"),
                          ("agent-3", "cancelled"))]
    path = tmp_path / "session-batch.json"
    path.write_text(json.dumps({"sessionId": "s", "projectHash": "h", "messages": [
        {"id": "u", "type": "user", "content": "go"},
        {"id": "g", "type": "gemini", "content": "", "toolCalls": calls},
        {"id": "g2", "type": "gemini", "content": "done"}]}))
    (session,) = load(path).sessions
    results = [m for m in session.messages if m.role == "tool"]
    assert [m.text for m in results] == ["file text\n--- extra file ---",
                                         "[Operation Cancelled] denied",
                                         "finished\ncancelled by user"]
    assert [m.is_error for m in results] == [False, True, True]
