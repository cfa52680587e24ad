"""SPEC §11 recorded usage per model call, checked against the files themselves.

The expected figures are read from each shared file here, by a reading of its own (plain
`json`, the format's documented fields), not through the importers' helpers. Every file of a
format's folder is checked, so held-out files laid out the same way are checked too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxsim.importers import load
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.trace import build_trace
from tests.shared import requires_shared, shared_files

FIXTURES = Path(__file__).parent / "fixtures"
REPRO = "agentcmd__rollout-2025-09-24T20-12-23-*.jsonl"  # issue 15's repro, with the image


def _params(subdir: str, pattern: str) -> list:
    return [pytest.param(path, id=path.name) for path in shared_files(subdir, pattern)]


def _assistants(session) -> list[Message]:
    return [m for m in session.messages if m.role == "assistant"]


def _jsonl(path: Path) -> list[dict]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a cut-off last line
        if isinstance(record, dict):
            records.append(record)
    return records


# --- Claude Code: input + cache creation + cache read, once per message.id -----------------

def claude_code_billed(path: Path) -> dict[str, int]:
    billed: dict[str, int] = {}
    for record in _jsonl(path):
        message = record.get("message")
        if record.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if isinstance(usage, dict) and message.get("id") and message["id"] not in billed:
            billed[message["id"]] = (
                usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0)
                + usage.get("cache_read_input_tokens", 0)
            )
    return billed


@requires_shared
@pytest.mark.parametrize("path", _params("transcripts/claude-code-jsonl", "*.jsonl"))
def test_claude_code_calls_carry_their_responses_billed_input_once_per_message_id(path):
    billed = claude_code_billed(path)
    seen: list[str] = []
    for session in load(path).sessions:
        for message in _assistants(session):
            msg_id = message.meta.get("message_id")
            recorded = message.meta.get("recorded")
            if recorded is None:
                assert msg_id not in billed or msg_id in seen
                continue
            assert recorded["total_input"] == billed[msg_id]
            assert msg_id not in seen  # never billed twice
            seen.append(msg_id)
    assert seen, "a Claude Code sample with usage should yield recorded calls"


# --- Codex: the k-th token_count whose total moved is the k-th model call ---------------

def codex_billed(path: Path) -> list[int]:
    billed, last = [], None
    for record in _jsonl(path):
        payload = record.get("payload")
        if record.get("type") != "event_msg" or not isinstance(payload, dict):
            continue
        info = payload.get("info")
        if payload.get("type") != "token_count" or not isinstance(info, dict):
            continue
        total = info["total_token_usage"]["total_tokens"]
        if total != last:
            billed.append(info["last_token_usage"]["input_tokens"])
        last = total
    return billed


@requires_shared
@pytest.mark.parametrize("path", _params("transcripts/codex-rollout", "*.jsonl"))
def test_codex_calls_get_the_growing_token_counts_in_order_never_by_position(path):
    billed = codex_billed(path)
    (session,) = load(path).sessions
    recorded = [m.meta.get("recorded") for m in _assistants(session)]
    expected = billed[: len(recorded)] + [None] * (len(recorded) - len(billed))
    assert [r and r["total_input"] for r in recorded] == expected


@requires_shared
def test_the_issue_repro_rollout_gives_the_first_call_its_own_usage():
    (path,) = shared_files("transcripts/codex-rollout", REPRO)
    (session,) = load(path).sessions
    totals = [m.meta["recorded"]["total_input"] for m in _assistants(session)]
    assert totals[:4] == [3587, 3984, 4213, 4392]


@requires_shared
@pytest.mark.parametrize("version, pattern", [
    ("0.40", "agentcmd__rollout-2025-09-2*.jsonl"),  # token_count before the items
    ("0.58", "codex-session-view__rollout-*.jsonl"),  # before, then repeated after
])
def test_codex_alignment_holds_for_each_rollout_version(version, pattern):
    paths = shared_files("transcripts/codex-rollout", pattern)
    assert paths
    for path in paths:
        (session,) = load(path).sessions
        assert session.meta["cli_version"] == version + ".0"
        assistants = _assistants(session)
        # These rollouts record one growing event per response: every call is answered.
        assert len(codex_billed(path)) == len(assistants)
        assert all(m.meta.get("recorded") for m in assistants)


@requires_shared
def test_codex_reasoning_items_carry_their_responses_reasoning_tokens():
    (path,) = shared_files("transcripts/codex-rollout", REPRO)
    (session,) = load(path).sessions
    with_reasoning = [m for m in _assistants(session) if m.meta.get("reasoning_items")]
    assert with_reasoning
    for m in with_reasoning:
        assert m.meta.get("reasoning_tokens", 0) == (m.meta["recorded"]["reasoning"] or 0)
    assert sum(m.meta.get("reasoning_tokens", 0) for m in with_reasoning) > 0


@requires_shared
@pytest.mark.parametrize("path", _params("transcripts/codex-rollout-legacy", "*.jsonl"))
def test_legacy_rollouts_record_no_usage(path):
    (session,) = load(path).sessions
    assert not any(m.meta.get("recorded") for m in session.messages)
    assert "recorded_totals" not in session.meta


# --- OpenHands: model_response.usage by response id -----------------------------------------

def openhands_billed(events: list, token_usages: list | None = None) -> dict:
    """Event id of each agent action → its response's prompt tokens: the run's
    `token_usages` entry with the response's id, else the event's own `model_response`
    usage (first event of a response only; later events of it are not new calls)."""
    by_id = {u["response_id"]: u["prompt_tokens"] for u in reversed(token_usages or [])
             if isinstance(u, dict) and u.get("response_id")}
    billed: dict = {}
    seen: set[str] = set()
    for event in events:
        if not isinstance(event, dict) or event.get("action") == "recall":
            continue
        response = (event.get("tool_call_metadata") or {}).get("model_response") or {}
        if response.get("id") and response["id"] not in seen:
            seen.add(response["id"])
            usage = response.get("usage") or {}
            billed[str(event["id"])] = by_id.get(response["id"], usage.get("prompt_tokens"))
    if by_id or token_usages:
        billed["token_usages"] = True  # unnamed responses may take their entry in order
    return billed


def openhands_runs(path: Path) -> list[dict]:
    """(events, token_usages) per session: one event array, or one eval instance per line."""
    if path.suffix == ".jsonl":
        return [openhands_billed(record.get("history") or [],
                                 (record.get("metrics") or {}).get("token_usages"))
                for record in _jsonl(path)]
    document = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(document, dict):
        events = document.get("history") or document.get("trajectory") or []
        return [openhands_billed(events, (document.get("metrics") or {}).get("token_usages"))]
    return [openhands_billed(document)]


@requires_shared
@pytest.mark.parametrize("path", _params("transcripts/openhands", "*.json*"))
def test_openhands_calls_carry_their_responses_prompt_tokens(path):
    runs = openhands_runs(path)
    sessions = load(path).sessions
    assert len(sessions) == len(runs)
    for billed, session in zip(runs, sessions, strict=True):
        found = {}
        for message in _assistants(session):
            recorded = message.meta.get("recorded")
            event = str(message.meta.get("event_id"))
            if event in billed:
                found[event] = recorded and recorded["total_input"]
            elif not billed.get("token_usages"):
                assert recorded is None  # no response figure in the file for this call
        billed.pop("token_usages", None)
        assert found == billed


def test_openhands_eval_runs_have_one_model_call_per_token_usage(tmp_path):
    """The recall action was a phantom call with the user's prompt as arguments."""
    lines = [json.loads(line) for line in (FIXTURES / "openhands-eval-output.jsonl")
             .read_text().splitlines()]
    first = lines[0]
    first["metrics"]["token_usages"] = [
        {"model": "claude", "prompt_tokens": 5100, "completion_tokens": 80,
         "cache_read_tokens": 4000, "cache_write_tokens": 600, "response_id": "chatcmpl-1"},
    ]
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    session = load(path).sessions[0]
    assert not any(call.name == "recall" for m in session.messages for call in m.tool_calls)
    recorded = [m.meta.get("recorded") for m in _assistants(session)]
    answered = [r for r in recorded if r]
    assert len(answered) == len(first["metrics"]["token_usages"])
    assert answered[0] == {"total_input": 5100, "input": 500, "cache_read": 4000,
                           "cache_write": 600, "output": 80, "reasoning": None}


def _eval_run(tmp_path: Path, token_usages: list[dict]) -> list:
    lines = [json.loads(line) for line in (FIXTURES / "openhands-eval-output.jsonl")
             .read_text().splitlines()]
    lines[0]["metrics"]["token_usages"] = token_usages
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return [m.meta.get("recorded") for m in _assistants(load(path).sessions[0])]


def _token_usage(prompt: int, response_id: str) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": 9, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "response_id": response_id}


def test_openhands_responses_no_event_names_pair_up_in_order_between_matched_ones(tmp_path):
    # The run's three model calls: the grep/view response (named by its events), then the
    # edit and the final message, whose events carry no response id.
    recorded = _eval_run(tmp_path, [_token_usage(5100, "chatcmpl-1"),
                                    _token_usage(5400, "chatcmpl-2"),
                                    _token_usage(5600, "chatcmpl-3")])
    assert [r and r["total_input"] for r in recorded] == [5100, 5400, 5600]


def test_openhands_leaves_a_gap_without_usage_when_the_counts_do_not_match(tmp_path):
    recorded = _eval_run(tmp_path, [_token_usage(5100, "chatcmpl-1"),
                                    _token_usage(5400, "chatcmpl-2")])
    assert [r and r["total_input"] for r in recorded] == [5100, None, None]


# --- SWE-agent: per-trajectory totals only --------------------------------------------------

@requires_shared
@pytest.mark.parametrize("path", _params("transcripts/swe-agent-traj", "*.traj"))
def test_swe_agent_records_only_the_trajectorys_totals(path):
    stats = json.loads(path.read_text(encoding="utf-8"))["info"].get("model_stats") or {}
    (session,) = load(path).sessions
    assert not any(m.meta.get("recorded") for m in session.messages)
    if stats.get("tokens_sent"):
        totals = session.meta["recorded_totals"]
        assert totals["total_input"] == stats["tokens_sent"]
        assert totals["per_call"] is False


def test_a_swe_agent_demo_replay_with_zero_model_stats_records_nothing(tmp_path):
    """SWE-agent's demonstrations replay recorded actions: `model_stats` all zeros."""
    traj = {"trajectory": [{"action": "ls", "observation": "a.py", "response": "ls",
                            "thought": ""}],
            "history": [{"role": "system", "content": "sys"},
                        {"role": "user", "content": "task"},
                        {"role": "assistant", "content": "ls", "action": "ls"},
                        {"role": "user", "content": "a.py"}],
            "info": {"model_stats": {"tokens_sent": 0, "tokens_received": 0, "api_calls": 0,
                                     "instance_cost": 0}}}
    path = tmp_path / "demo.traj"
    path.write_text(json.dumps(traj))
    (session,) = load(path).sessions
    assert "recorded_totals" not in session.meta


# --- Logs that carry the response -----------------------------------------------------------

def _write(tmp_path: Path, name: str, value: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(value))
    return path


def test_a_chat_log_with_its_response_imports_the_answer_and_its_usage(tmp_path):
    log = {"request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
           "response": {"id": "chatcmpl-9", "object": "chat.completion", "choices": [
               {"index": 0, "message": {"role": "assistant", "content": "hello"}}],
               "usage": {"prompt_tokens": 900, "completion_tokens": 5,
                         "prompt_tokens_details": {"cached_tokens": 640}}}}
    (session,) = load(_write(tmp_path, "litellm.json", log)).sessions
    assert [m.role for m in session.messages] == ["user", "assistant"]
    assert session.messages[-1].text == "hello"
    assert session.messages[-1].meta["recorded"] == {
        "total_input": 900, "input": 260, "cache_read": 640, "cache_write": None,
        "output": 5, "reasoning": None}
    assert session.meta["recorded_totals"]["cache_read_share"] == round(640 / 900, 4)


def test_a_responses_request_logged_with_its_response_imports_the_output(tmp_path):
    log = {"model": "gpt-5", "input": [{"role": "user", "content": "list files"}],
           "response": {"object": "response", "output": [
               {"type": "reasoning", "summary": []},
               {"type": "function_call", "call_id": "call_1", "name": "ls",
                "arguments": "{}"}],
               "usage": {"input_tokens": 1200, "output_tokens": 40,
                         "input_tokens_details": {"cached_tokens": 1024},
                         "output_tokens_details": {"reasoning_tokens": 30}}}}
    (session,) = load(_write(tmp_path, "responses.json", log)).sessions
    answer = session.messages[-1]
    assert answer.role == "assistant" and answer.tool_calls[0].name == "ls"
    assert answer.meta["recorded"]["total_input"] == 1200
    assert answer.meta["recorded"]["reasoning"] == 30


def test_an_anthropic_log_with_its_response_sums_the_cache_fields(tmp_path):
    log = {"request": {"model": "claude-sonnet-4", "max_tokens": 100, "system": "be brief",
                       "messages": [{"role": "user", "content": "hi"}]},
           "response": {"type": "message", "role": "assistant",
                        "content": [{"type": "text", "text": "hello"}],
                        "usage": {"input_tokens": 3, "cache_creation_input_tokens": 100,
                                  "cache_read_input_tokens": 2000, "output_tokens": 7}}}
    (session,) = load(_write(tmp_path, "anthropic.json", log)).sessions
    assert session.messages[-1].meta["recorded"] == {
        "total_input": 2103, "input": 3, "cache_read": 2000, "cache_write": 100,
        "output": 7, "reasoning": None}
    assert session.meta["provider"] == "anthropic"


def test_the_trailing_call_is_labelled_and_carries_no_usage(tmp_path):
    log = {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"}]}
    (session,) = load(_write(tmp_path, "chat.json", log)).sessions
    trace = build_trace(replay(session.messages, "none"))
    last = trace["calls"][-1]
    assert last["response_input_index"] is None
    assert last["label"] == "next call (not in the transcript)"
    assert last["recorded"] is None
    assert trace["calibration"] is None  # no usage at all: uncalibrated
    assert last["tokens"]["calibrated_raw"] is None


def _rollout_line(kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": "2026-03-01T10:00:00Z", "type": kind, "payload": payload})


def _token_count(total: int, last: int) -> str:
    return _rollout_line("event_msg", {"type": "token_count", "info": {
        "total_token_usage": {"total_tokens": total},
        "last_token_usage": {"input_tokens": last, "cached_input_tokens": 0,
                             "output_tokens": 20, "total_tokens": last + 20}}})


def test_a_codex_response_after_the_running_total_restarts_keeps_its_usage(tmp_path):
    """Issue 25: one real rollout's running total went 1,363,408 → 37,543; that response
    is still a new model call, and so are the ones after it (a repeat is not)."""
    lines = [_rollout_line("session_meta", {"id": "s1", "cwd": "/w"})]
    for k, (total, last) in enumerate([(1_300_000, 41_000), (1_363_408, 43_000),
                                       (37_543, 37_500), (37_543, 37_500), (76_000, 38_400)]):
        if k != 3:  # the fourth event repeats the third (0.58 writes one again)
            lines += [_rollout_line("response_item", {
                "type": "function_call", "name": "shell", "arguments": "{}",
                "call_id": f"c{k}"}),
                _rollout_line("response_item", {"type": "function_call_output",
                                                "call_id": f"c{k}", "output": "ok"})]
        lines.append(_token_count(total, last))
    path = tmp_path / "rollout-2026-03-01T10-00-00-s1.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (session,) = load(path).sessions
    recorded = [m.meta.get("recorded") for m in _assistants(session)]
    assert [r and r["total_input"] for r in recorded] == [41_000, 43_000, 37_500, 38_400]
    assert session.meta["recorded_totals"]["total_input"] == 41_000 + 43_000 + 37_500 + 38_400


def test_a_forked_codex_sub_agent_bills_only_its_own_calls(tmp_path):
    """A forked sub-agent's rollout (Codex Desktop 0.119) opens with its parent's events:
    the parent's session_meta, its task and its token_counts, none of its response items.
    Those bills are the parent's; the child's own calls take the ones of its own turn."""
    def call(call_id):
        return [_rollout_line("response_item", {"type": "function_call", "name": "shell",
                                                "arguments": "{}", "call_id": call_id}),
                _rollout_line("response_item", {"type": "function_call_output",
                                                "call_id": call_id, "output": "ok"})]
    lines = [_rollout_line("session_meta", {"id": "child", "forked_from_id": "parent",
                                            "source": {"subagent": {"thread_spawn": {}}}}),
             _rollout_line("session_meta", {"id": "parent"}),
             _rollout_line("turn_context", {"model": "gpt-5"}),
             _rollout_line("response_item", {"type": "message", "role": "user",
                                             "content": [{"type": "input_text",
                                                          "text": "parent task"}]}),
             _token_count(39_270, 38_565), _token_count(79_214, 39_556),
             _rollout_line("turn_context", {"model": "gpt-5"}),
             _rollout_line("response_item", {"type": "message", "role": "user",
                                             "content": [{"type": "input_text",
                                                          "text": "child task"}]}),
             _token_count(79_214, 39_556),  # a repeat
             *call("c1"), _token_count(118_556, 39_342), *call("c2"),
             _token_count(158_000, 39_444)]
    path = tmp_path / "rollout-2026-04-15T11-58-23-child.jsonl"
    path.write_text("\n".join(lines) + "\n")
    (session,) = load(path).sessions
    assert [m.meta["recorded"]["total_input"] for m in _assistants(session)] == [39_342,
                                                                                  39_444]
