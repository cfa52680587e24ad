"""Importers (pure tier): counts on every shared sample, message-level details per format,
the bad-input corpus, detection by content, streaming and cut-off last lines."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctxsim import importers
from ctxsim.importers import FORMATS, TranscriptError, detect, load
from ctxsim.importers.archive import archive_bytes
from tests.importers.agent_fixtures import FIXTURES as AGENT_FIXTURES
from tests.shared import ROOT, SHARED_DIR, requires_shared

FIXTURES = Path(__file__).parent / "fixtures"
BAD = FIXTURES / "bad"
SAMPLES = SHARED_DIR / "transcripts"
EXPECTED_COUNTS = SAMPLES / "expected-counts.json"


def _expected_samples() -> list:
    if not EXPECTED_COUNTS.is_file():
        return [pytest.param(None, None, marks=requires_shared, id="shared-missing")]
    expected = json.loads(EXPECTED_COUNTS.read_text())
    return [pytest.param(name, counts, id=name) for name, counts in expected.items()]


def counts_of(result: importers.ImportResult) -> dict[str, int]:
    return {
        "sessions": len(result.sessions),
        "tool_calls": sum(session.tool_call_count for session in result.sessions),
        "tool_results": sum(session.tool_result_count for session in result.sessions),
    }


def sample(relative: str) -> Path:
    path = SAMPLES / relative
    if not path.is_file():
        pytest.skip(f"shared sample {relative} not found under {SAMPLES}")
    return path


# -- counts ------------------------------------------------------------------------------------


@requires_shared
@pytest.mark.shared
@pytest.mark.parametrize(("name", "expected"), _expected_samples())
def test_every_shared_sample_yields_the_expected_sessions_calls_and_results(name, expected):
    result = load(SAMPLES / name)
    assert counts_of(result) == expected


FIXTURE_COUNTS = {
    # file: (format, sessions, tool calls, tool results)
    "openai-chat-request.json": ("openai-chat", 1, 2, 2),
    "openai-chat-legacy-functions.json": ("openai-chat", 1, 1, 1),
    "openai-chat-finetune.jsonl": ("openai-chat", 2, 1, 1),
    "openai-responses-request.json": ("openai-responses", 1, 3, 3),
    "openai-responses-items.json": ("openai-responses", 1, 1, 1),
    "anthropic-messages-request.json": ("anthropic-messages", 1, 2, 2),
    "anthropic-messages-array.json": ("anthropic-messages", 1, 1, 1),
    "chatcli-session-v2.json": ("chatcli", 2, 2, 2),
    "chatcli-session-legacy.json": ("chatcli", 1, 1, 1),
    "openhands-eval-output.jsonl": ("openhands-eval", 2, 4, 4),  # recall is no call (§11)
    "claude-code-small.jsonl": ("claude-code", 1, 3, 3),
    "claude-code-subagent.jsonl": ("claude-code", 1, 1, 1),
    "scenario.json": ("scenario", 1, 2, 2),
    "swe-agent-demo-history-only.traj": ("swe-agent", 1, 3, 3),
    "claude-code-progress-forks.jsonl": ("claude-code", 1, 3, 3),
    "openhands-trajectory-export.json": ("openhands", 1, 1, 1),
    "codex-legacy-session-items.json": ("codex-legacy", 1, 2, 2),
    "openhands-eval-failed-instance.jsonl": ("openhands-eval", 2, 1, 1),
    "claude-code-sidechains-off-main.jsonl": ("claude-code", 3, 4, 4),
    "swe-agent-demo-text-history-only.traj": ("swe-agent", 1, 2, 2),
}


@pytest.mark.parametrize("name", sorted(FIXTURE_COUNTS))
def test_each_hand_made_fixture_is_detected_and_counted(name):
    format_name, sessions, calls, results = FIXTURE_COUNTS[name]
    result = load(FIXTURES / name)
    assert result.format == format_name
    assert counts_of(result) == {
        "sessions": sessions, "tool_calls": calls, "tool_results": results,
    }
    assert result.warnings == []


def test_every_format_has_a_fixture_or_a_shared_sample():
    covered = {format_name for format_name, *_ in FIXTURE_COUNTS.values()}
    covered |= {"codex", "codex-legacy", "swe-agent", "openhands"}  # shared samples
    # A folder packed into an archive on the fly: tests/importers/test_claude_code_requests.py
    covered |= {"claude-code-requests"}
    # The agents of issue 29: fixtures built in code (tests/importers/agent_fixtures.py)
    covered |= {format_name for _, format_name, *_ in AGENT_FIXTURES.values()}
    assert covered == set(FORMATS)


# -- message-level details per format ----------------------------------------------------------


def calls_by_id(session):
    return {call.id: call for message in session.messages for call in message.tool_calls}


def results_by_id(session):
    return {message.tool_call_id: message for message in session.messages if message.role == "tool"}


def test_every_tool_result_answers_a_call_of_an_earlier_assistant_message():
    for name in FIXTURE_COUNTS:
        for session in load(FIXTURES / name).sessions:
            seen: set[str] = set()
            for message in session.messages:
                seen.update(call.id for call in message.tool_calls)
                if message.role == "tool":
                    assert message.tool_call_id in seen, (name, message.tool_call_id)


def test_claude_code_merges_one_response_and_gathers_side_branch_results():
    (session,) = load(FIXTURES / "claude-code-small.jsonl").sessions
    roles = [message.role for message in session.messages]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "tool", "assistant"]
    first_answer = session.messages[1]
    assert first_answer.text == "Let me read the cart code and its test."
    assert [call.id for call in first_answer.tool_calls] == ["toolu_cart", "toolu_shot"]
    assert first_answer.tool_calls[0].arguments == '{"file_path":"/home/dev/shop/cart.py"}'
    assert first_answer.meta["thinking"] == ["Probably float math."]
    assert first_answer.meta["source_line"] == 4
    assert first_answer.meta["usage"]["cache_read_input_tokens"] == 14000
    # The side-branch result (parent: its own tool_use line) is gathered in file order.
    assert session.messages[2].tool_call_id == "toolu_cart"
    image = session.messages[3].meta["binary_parts"][0]
    assert image["media_type"] == "image/png" and image["bytes"] == 70
    assert session.messages[5].is_error and "FAILED" in session.messages[5].text
    assert session.title == "Checkout total rounding fix"
    assert session.meta["cwd"] == "/home/dev/shop"


def test_a_claude_code_subagent_file_is_a_sidechain_session_linked_to_its_parent():
    (session,) = load(FIXTURES / "claude-code-subagent.jsonl").sessions
    assert session.key == "a3f9c21b"
    assert session.parent_key == "7f1c2a9e-0000-4000-8000-000000000001"
    assert all(message.meta["sidechain"] for message in session.messages)


@requires_shared
def test_claude_code_inline_sidechains_become_sessions_linked_to_the_task_call():
    result = load(sample("claude-code-jsonl/ccviewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"))
    main, *subagents = result.sessions
    assert main.messages[0].text.startswith("<command-message>orchestrator is running")
    assert main.messages[1].meta.get("injected") is True  # isMeta slash-command expansion
    assert len(subagents) == 2
    task_calls = calls_by_id(main)
    for subagent in subagents:
        assert subagent.parent_key == main.key
        assert task_calls[subagent.meta["parent_tool_use_id"]].name == "Task"
    errors = [m for s in result.sessions for m in s.messages if m.role == "tool" and m.is_error]
    assert len(errors) == 3


@requires_shared
def test_claude_code_2_1_parallel_results_on_side_branches_follow_their_calls():
    (session,) = load(sample(
        "claude-code-jsonl/claude-reliability__coverage-test-fix__transcript.jsonl"
    )).sessions
    assert session.messages[0].text.startswith("Add a function called multiply_numbers")
    parallel = session.messages[3]
    assert [call.name for call in parallel.tool_calls] == ["Read", "Read"]
    following = [m.tool_call_id for m in session.messages[4:6]]
    assert following == [call.id for call in parallel.tool_calls]
    assert results_by_id(session)["toolu_01LZHfE3DNUh3HBws9z8uhN2"].is_error


@requires_shared
def test_codex_maps_response_items_with_usage_and_instructions():
    (session,) = load(sample(
        "codex-rollout/codex-session-view__rollout-2025-11-17T15-30-28-"
        "019a93b9-f380-7600-98ff-940e6b99603c.jsonl"
    )).sessions
    assert session.title.startswith("finish up the users work by rigging up the chatbot-ui")
    assert session.messages[0].meta["injected"] is True  # <environment_context>
    first_call = session.messages[2].tool_calls[0]
    assert first_call.id == "call_GfHib9GW3d5m9EB1wMTper0j" and first_call.name == "shell"
    # 0.58 writes a response's token_count before its items: the first growing event is the
    # first call's usage (the old by-position attachment gave it the second call's 10334).
    assert session.messages[2].meta["recorded"]["total_input"] == 10128
    assert session.messages[2].meta["usage"]["input_tokens"] == 10128
    result = results_by_id(session)[first_call.id]
    # 0.58 sent a shell result as text; the rollout's JSON stays in meta for the page.
    assert result.text.startswith("Exit code: 0\nWall time: 0 seconds\nOutput:\nLM Studio")
    assert result.meta["recorded_output"].startswith('{"output":"LM Studio configuration.md')
    assert session.meta["cli_version"] == "0.58.0"


@requires_shared
def test_legacy_codex_puts_the_instructions_first_and_links_calls_by_call_id():
    legacy = sample("codex-rollout-legacy/codex-session-viewer__docs-example.jsonl")
    (session,) = load(legacy).sessions
    assert session.messages[0].role == "system"
    assert session.messages[0].text.startswith("# path: AGENTS.md\r\n")
    assert session.title.startswith("What's the next task I should work on?")
    calls = calls_by_id(session)
    assert calls["call_jvRipVlcLVqJzlUIW4FkocnI"].name == "task-master-ai__next_task"
    assert results_by_id(session)["call_jvRipVlcLVqJzlUIW4FkocnI"].text.startswith('[{"text":')
    assert any(m.is_error and m.error_code.startswith("ExitCode:") for m in session.messages)


@requires_shared
def test_swe_agent_text_actions_become_synthetic_calls_named_by_their_command():
    (session,) = load(sample(
        "swe-agent-traj/swe-agent__human_thought__humanevalfix-python-0.traj"
    )).sessions
    assert session.messages[0].role == "system"
    assert session.messages[1].text.startswith("We're currently solving the following issue")
    call = session.messages[2].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "swe-agent-1", "ls", {"action": "ls -a\n"}
    )
    assert session.messages[3].tool_call_id == "swe-agent-1"
    assert session.messages[3].text == ".\n..\n.git\nmain.py\n"


@requires_shared
def test_swe_agent_demonstrations_are_tagged_not_parsed():
    (session,) = load(sample("swe-agent-traj/swe-agent__gpt4__pydicom__pydicom-1458.traj")).sessions
    assert session.messages[1].meta["demonstration"] is True
    assert not session.messages[1].tool_calls


@requires_shared
def test_openhands_uses_tool_call_ids_and_the_cause_rule():
    (session,) = load(sample("openhands/openhands__runtime-trajs-basic_gui_mode.json")).sessions
    assert session.messages[0].text.startswith("I want to create a VueJS app")
    call = session.messages[1].tool_calls[0]
    assert call.id.startswith("toolu_01W") and call.name == "run"
    assert json.loads(call.arguments)["command"] == "mkdir -p /workspace/todo-app"
    assert session.messages[2].tool_call_id == call.id
    assert results_by_id(session)[session.messages[7].tool_calls[0].id].is_error  # success false
    # The final agent message has only a null observation: a plain assistant message.
    assert session.messages[-1].role == "assistant" and not session.messages[-1].tool_calls


def test_openhands_eval_merges_parallel_calls_and_numbers_synthetic_ids_in_file_order():
    first, second = load(FIXTURES / "openhands-eval-output.jsonl").sessions
    assert first.key == "django__django-11099"
    assert first.messages[0].role == "system"
    assert first.tools[0]["function"]["name"] == "execute_bash"
    assert first.messages[1].text.startswith("UsernameValidator allows a trailing newline")
    ids = [[call.id for call in message.tool_calls] for message in first.messages]
    # SPEC §11: the runtime's recall is neither a call nor a model call; its observation is a
    # user message.
    recall = first.messages[2]
    assert recall.role == "user" and recall.text == "Added workspace context"
    assert recall.meta["recall"] is True
    assert ["toolu_grep", "toolu_view"] in ids  # one model response, two calls
    assert results_by_id(first)["toolu_view"].is_error
    assert ["openhands-eval-3"] in ids
    assert [call.id for m in second.messages for call in m.tool_calls] == ["openhands-eval-4"]
    assert second.messages[-1].text == "I could not reproduce it; stopping."
    assert first.meta["model"] == "claude-3-5-sonnet"


def test_openai_chat_keeps_tools_schema_invalid_arguments_and_images():
    (session,) = load(FIXTURES / "openai-chat-request.json").sessions
    assert session.messages[0].role == "system" and session.messages[0].meta["source_role"]
    assert session.messages[1].text == "Why does the build fail on CI but not locally?"
    assert session.messages[1].meta["binary_parts"][0]["bytes"] == 70
    assert session.tools[0]["function"]["name"] == "read_file"
    assert session.response_schema["json_schema"]["name"] == "answer"
    calls = calls_by_id(session)
    assert calls["call_lock"].arguments == '{"path": "poetry.lock"'  # kept verbatim
    assert results_by_id(session)["call_lock"].text == "Error: poetry.lock not found"


def test_openai_chat_legacy_function_calls_get_synthetic_ids():
    (session,) = load(FIXTURES / "openai-chat-legacy-functions.json").sessions
    assert session.messages[2].tool_calls[0].id == "openai-chat-1"
    answer = session.messages[3]
    assert answer.role == "tool" and answer.tool_call_id == "openai-chat-1"


def test_openai_responses_groups_output_items_into_one_assistant_message_per_call():
    (session,) = load(FIXTURES / "openai-responses-request.json").sessions
    assert [m.role for m in session.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
        "assistant",
    ]
    assert session.messages[0].text == "You are Codex, a coding agent. Keep answers short."
    assert session.messages[2].meta["reasoning"] == ["Look at cli.py first."]
    patch = session.messages[4].tool_calls[0]
    assert (patch.id, patch.type) == ("call_patch", "custom")
    assert patch.arguments.startswith("*** Begin Patch")
    failed = results_by_id(session)["call_test"]
    assert failed.is_error and failed.error_code == "ExitCode:1"
    assert session.response_schema["name"] == "summary"
    assert [tool["name"] for tool in session.tools] == ["shell", "apply_patch"]


def test_anthropic_system_becomes_a_leading_message_and_results_keep_is_error():
    (session,) = load(FIXTURES / "anthropic-messages-request.json").sessions
    assert session.messages[0].role == "system"
    assert session.messages[0].text == "You are a helpful SRE assistant."
    assert session.messages[1].text == "Why did p95 latency spike at 14:00?"
    results = results_by_id(session)
    assert results["toolu_01A"].is_error and not results["toolu_01B"].is_error
    assert results["toolu_01B"].meta["binary_parts"][0]["media_type"] == "image/png"
    # Two consecutive assistant messages are one turn, hence one model call.
    assert session.messages[-1].text == (
        "The dashboard shows a deploy at 13:58; the spike follows it, so roll back first."
    )
    assert session.tools[0]["input_schema"]["required"] == ["sql"]


def test_chatcli_histories_are_separate_sessions_with_feedback_and_errors():
    chat, agent = load(FIXTURES / "chatcli-session-v2.json").sessions
    assert (chat.key, agent.key) == ("chat", "agent")
    assert chat.messages[1].meta["binary_parts"][0]["file_name"] == "login.png"
    call = agent.messages[1].tool_calls[0]
    assert (call.name, call.arguments) == ("@search", '{"term":"EMAIL_RE","path":"src/"}')
    failed = results_by_id(agent)["call_a2"]
    assert failed.is_error and failed.error_code == "ENOENT"
    assert agent.messages[4].agent_feedback
    assert agent.messages[5].meta["is_summary"] is True


def test_a_scenario_imports_through_the_engine_parser():
    (session,) = load(FIXTURES / "scenario.json").sessions
    assert session.meta["config"]["spill_dir"] == "/tmp/ctxsim-spill"
    assert session.messages[2].tool_calls[1].arguments == '{"path":"CHANGES.md"}'
    assert session.messages[4].is_error and session.messages[4].error_code == "ENOENT"


# -- bad inputs --------------------------------------------------------------------------------

BAD_INPUTS = {
    "empty.jsonl": "the file is empty",
    "only-whitespace.json": "the file is empty",
    "nul-bytes.jsonl": "line 1, column 83: this is a binary file",
    "binary.png": "binary file",
    "latin1.json": "line 1, column 46: the file is not UTF-8 text",
    "utf16.json": "UTF-16",
    "malformed.json": "line 4, column 21: malformed JSON (Expecting ',' delimiter)",
    "corrupt-middle-line.jsonl": "line 2, column 128: malformed JSON",
    "cut-off-middle-line.jsonl": "line 2: this line is not a complete JSON value (cut off",
    "deep-nesting.json": "nested deeper than 200 levels",
    "deep-nesting.jsonl": "line 2: the JSON is nested deeper than 200 levels",
    "unknown-format.json": "unknown transcript format: a JSON object with `title`, `entries` "
                           "matches none of the",
    "wrong-shape-claude-code.jsonl": "line 2: `message.content` should be a list, not a number",
    "wrong-shape-codex.jsonl": "line 2: `payload` should be an object, not a list",
    "wrong-shape-openai-chat.json": "`messages[1].tool_calls[0].function` should be an object",
    "wrong-shape-swe-agent.traj": "`trajectory[0]` should be an object, not a string",
    "encrypted-chatcli.json": "encrypted ChatCLI session",
    "zip-archive.eval": "ZIP archive",
    "scenario-unknown-key.json": "messages[0].colour: unknown key",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_each_bad_input_gives_its_one_line_message_and_nothing_else(name):
    with pytest.raises(TranscriptError) as raised:
        load(BAD / name)
    message = str(raised.value)
    assert BAD_INPUTS[name] in message
    assert "\n" not in message


def test_every_bad_input_file_has_an_expected_message():
    assert sorted(path.name for path in BAD.iterdir()) == sorted(BAD_INPUTS)


def test_the_unknown_format_error_says_why_each_format_did_not_match():
    with pytest.raises(TranscriptError) as raised:
        load(BAD / "unknown-format.json")
    # The message is one short line; why each format did not match is in the details.
    assert len(str(raised.value)) < 120
    assert [detail.split(":", 1)[0] for detail in raised.value.details] == [
        name for name in FORMATS if name != "claude-code-requests"] + ["claude-code-requests"]


def test_a_file_over_the_size_limit_is_refused_before_reading():
    with pytest.raises(TranscriptError, match=r"over the 0\.0 MB limit"):
        load(FIXTURES / "scenario.json", max_bytes=100)


def test_a_forced_format_that_does_not_fit_says_which_field_is_wrong():
    with pytest.raises(TranscriptError, match="`trajectory` should be a list, not null"):
        load(FIXTURES / "scenario.json", format="swe-agent")
    with pytest.raises(TranscriptError, match="line 1: this line is not a complete JSON value"):
        load(FIXTURES / "openai-chat-legacy-functions.json", format="claude-code")
    with pytest.raises(TranscriptError, match="unknown format 'gemini'"):
        load(FIXTURES / "scenario.json", format="gemini")


def test_duplicate_keys_are_valid_and_the_last_one_wins(tmp_path):
    path = tmp_path / "dup.json"
    path.write_text('[{"role": "user", "content": "first", "content": "second"}]')
    (session,) = load(path).sessions
    assert session.messages[0].text == "second"


# -- JSON Lines: cut-off last line, streams ---------------------------------------------------


def test_a_cut_off_last_line_is_skipped_with_a_warning(tmp_path):
    data = (FIXTURES / "claude-code-small.jsonl").read_bytes()
    path = tmp_path / "live.jsonl"
    path.write_bytes(data + b'{"parentUuid":"u-0011","isSidechain":false,"type":"assistant","mess')
    result = load(path)
    assert counts_of(result) == counts_of(load(FIXTURES / "claude-code-small.jsonl"))
    assert len(result.warnings) == 1
    assert "line 14 was cut off" in result.warnings[0]


def test_a_last_line_cut_inside_a_multibyte_character_is_also_tolerated(tmp_path):
    data = (FIXTURES / "claude-code-small.jsonl").read_bytes()
    line = '{"parentUuid":"u-0010","type":"user","message":{"content":"café'.encode()
    path = tmp_path / "live.jsonl"
    path.write_bytes(data + line[:-1])
    assert "cut off" in load(path).warnings[0]


def test_uploads_are_read_from_binary_streams_even_when_not_seekable():
    data = (FIXTURES / "openhands-eval-output.jsonl").read_bytes()

    class Pipe(io.RawIOBase):
        def __init__(self):
            self._inner = io.BytesIO(data)

        def readable(self):
            return True

        def readinto(self, buffer):
            return self._inner.readinto(buffer)

    assert counts_of(load(io.BufferedReader(Pipe()))) == counts_of(load(io.BytesIO(data)))


# -- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_COUNTS))
def test_detection_reads_content_not_the_file_name(name, tmp_path):
    misleading = tmp_path / "transcript.traj.jsonl.json"
    shutil.copy(FIXTURES / name, misleading)
    assert detect(misleading) == FIXTURE_COUNTS[name][0]
    assert detect(io.BytesIO((FIXTURES / name).read_bytes())) == FIXTURE_COUNTS[name][0]


@requires_shared
def test_detection_recognizes_each_shared_sample_under_a_neutral_name(tmp_path):
    folders = {
        "claude-code-jsonl": "claude-code", "codex-rollout": "codex",
        "codex-rollout-legacy": "codex-legacy", "swe-agent-traj": "swe-agent",
        "openhands": "openhands",
    }
    for folder, format_name in folders.items():
        for path in sorted((SAMPLES / folder).iterdir()):
            neutral = tmp_path / "upload.bin"
            shutil.copy(path, neutral)
            assert detect(neutral) == format_name, path.name


# -- purity ------------------------------------------------------------------------------------


def test_importing_the_importers_leaves_django_unloaded():
    code = "import sys, ctxsim.importers; print('django' in sys.modules)"
    output = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert output.stdout.strip() == "False"


def test_old_openhands_eval_pairs_without_ids_link_each_observation_to_its_action():
    record = {"instance_id": "old-1", "history": [
        [{"source": "user", "action": "message", "args": {"content": "fix it"}},
         {"observation": "null", "content": "", "extras": {}}],
        [{"source": "agent", "action": "run", "args": {"command": "ls", "thought": "look"}},
         {"source": "agent", "observation": "run", "content": "a.py", "extras": {}}],
    ]}
    (session,) = load(io.BytesIO(json.dumps(record).encode() + b"\n")).sessions
    assert [m.role for m in session.messages] == ["user", "assistant", "tool"]
    assert session.messages[2].tool_call_id == session.messages[1].tool_calls[0].id


def test_a_swe_agent_demonstration_with_only_history_uses_its_native_calls():
    (session,) = load(FIXTURES / "swe-agent-demo-history-only.traj").sessions
    assert [m.role for m in session.messages] == [
        "system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool",
    ]
    assert [call.id for call in session.messages[2].tool_calls] == ["call_find"]
    assert session.messages[2].tool_calls[0].arguments == '{"file_name":"adder.py"}'
    assert session.messages[5].tool_call_id == "call_edit" and session.messages[5].text == ""


def test_a_text_acting_swe_agent_history_pairs_each_action_with_the_next_observation():
    (session,) = load(FIXTURES / "swe-agent-demo-text-history-only.traj").sessions
    assert [(m.role, m.tool_call_id) for m in session.messages[2:]] == [
        ("assistant", ""), ("tool", "swe-agent-1"), ("assistant", ""), ("tool", "swe-agent-2"),
        ("assistant", ""),
    ]
    assert session.messages[4].tool_calls[0].name == "cat"


def test_swe_agent_demo_steps_in_the_history_do_not_shift_the_runs_native_calls():
    def call(call_id):
        return [{"id": call_id, "type": "function",
                 "function": {"name": "bash", "arguments": "{}"}}]

    document = {
        "trajectory": [{"action": "ls", "observation": "a.py", "response": "look"}],
        "history": [
            {"role": "system", "content": "sys", "agent": "main"},
            {"role": "assistant", "content": "demo", "is_demo": True, "tool_calls": call("demo")},
            {"role": "tool", "content": "demo out", "is_demo": True, "tool_call_ids": ["demo"]},
            {"role": "user", "content": "task", "agent": "main"},
            {"role": "assistant", "content": "look", "tool_calls": call("call_real")},
            {"role": "tool", "content": "a.py", "tool_call_ids": ["call_real"]},
        ],
        "info": {},
    }
    (session,) = load(io.BytesIO(json.dumps(document).encode())).sessions
    assert [c.id for m in session.messages for c in m.tool_calls] == ["call_real"]


def test_claude_code_results_forked_off_by_progress_lines_stay_with_their_calls():
    # A result whose parent is a hook `progress` line, and a next answer that hangs off a
    # `bash_progress` line instead of the result: both results are still the chain's.
    (session,) = load(FIXTURES / "claude-code-progress-forks.jsonl").sessions
    assert [(m.role, m.tool_call_id) for m in session.messages] == [
        ("user", ""), ("assistant", ""), ("tool", "toolu_test"), ("tool", "toolu_lint"),
        ("assistant", ""), ("user", ""), ("assistant", ""), ("tool", "toolu_fmt"),
        ("assistant", ""),
    ]


def test_an_openhands_trajectory_export_wrapped_in_an_object_uses_the_cause_rule():
    (session,) = load(FIXTURES / "openhands-trajectory-export.json").sessions
    assert [(m.role, m.tool_call_id) for m in session.messages] == [
        ("user", ""), ("assistant", ""), ("tool", "toolu_wc"), ("assistant", ""),
    ]
    assert session.messages[1].tool_calls[0].name == "run"


def test_an_early_codex_rollout_document_maps_its_session_and_items():
    (session,) = load(FIXTURES / "codex-legacy-session-items.json").sessions
    assert session.key == "4e1f0c2a-7b7d-4b52-9a0e-3c1d2e3f4a5b"
    assert session.messages[0].role == "system"
    assert session.messages[0].text == "Prefer small, reviewable patches."
    assert session.title == "Why does `make` fail?"
    calls = calls_by_id(session)
    assert calls["call_make"].name == "shell" and calls["call_ls"].name == "local_shell"
    make = results_by_id(session)["call_make"]
    assert make.is_error and make.error_code == "ExitCode:2"


def test_an_openhands_eval_instance_without_history_is_still_a_session():
    failed, ran = load(FIXTURES / "openhands-eval-failed-instance.jsonl").sessions
    assert failed.key == "calc__calc-7" and failed.meta["error"].startswith("Agent failed")
    assert [(m.role, m.text) for m in failed.messages] == [("user", "Make `add` handle None.")]
    assert ran.tool_call_count == 1 and ran.tool_result_count == 1


def test_claude_code_subagents_whose_first_line_names_a_main_line_stay_apart():
    # Two inline subagents whose first lines point at the main chain's Task line instead of
    # null: each is its own session, and neither repeats the main chain's calls.
    main, links, images = load(FIXTURES / "claude-code-sidechains-off-main.jsonl").sessions
    assert [call.id for m in main.messages for call in m.tool_calls] == [
        "toolu_links", "toolu_imgs",
    ]
    assert [call.id for m in links.messages for call in m.tool_calls] == ["toolu_a_grep"]
    assert [call.id for m in images.messages for call in m.tool_calls] == ["toolu_b_grep"]
    assert links.meta["parent_tool_use_id"] == "toolu_links"
    assert images.meta["parent_tool_use_id"] == "toolu_imgs"
    assert links.messages[0].role == "user" and links.parent_key == main.key


def test_an_openhands_session_folder_reads_as_its_event_list():
    """OpenHands (V0) keeps a session on disk as `sessions/<id>/events/<n>.json`, one event
    per file: archived, the folder imports as the same events in number order would."""
    events = json.loads((FIXTURES / "openhands-trajectory-export.json").read_text())["trajectory"]
    files = {f"sessions/abc123/events/{n}.json": json.dumps(event).encode()
             for n, event in enumerate(events)}
    (folder,) = load(io.BytesIO(archive_bytes(dict(reversed(files.items()))))).sessions
    (exported,) = load(FIXTURES / "openhands-trajectory-export.json").sessions
    assert folder.format == "openhands" and folder.key == "abc123"
    assert [(m.role, m.text, m.tool_call_id) for m in folder.messages] == [
        (m.role, m.text, m.tool_call_id) for m in exported.messages]
