"""`simulate` errors: one line naming the problem and where, exit status 2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ctxsim.cli import main


def run(tmp_path: Path, scenario, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "s.json"
    path.write_text(scenario if isinstance(scenario, str) else json.dumps(scenario))
    out, err = io.StringIO(), io.StringIO()
    code = main([str(path), *args], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("scenario", "needle"), [
    ("{not json", "line 1"),
    ({"config": {}, "messages": [], "bogus": 1}, "bogus: unknown key"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": 3}}]}]},
     "messages[0].tool_calls[0].function.name: expected a string"),
    ({"messages": [{"role": "robot"}]}, "messages[0].role: expected one of"),
    ({"config": {"loop_mode": "fast"}, "messages": []}, "config.loop_mode: expected one of"),
    ({"profile": "nope", "messages": []}, "unknown profile 'nope'"),
    ({"config": [], "messages": []}, "config: expected an object"),
    ({"config": {"ccr": "off"}}, "messages: missing"),
    ({"config": {}, "messages": {"role": "user"}}, "messages: expected an array of messages"),
])
def test_bad_scenarios_exit_2_with_one_line_naming_where(tmp_path, scenario, needle) -> None:
    code, out, err = run(tmp_path, scenario)
    assert code == 2 and out == ""
    assert needle in err and err.count("\n") == 1


def test_a_missing_file_exits_2(tmp_path: Path) -> None:
    err = io.StringIO()
    assert main([str(tmp_path / "missing.json")], io.StringIO(), err) == 2
    assert "cannot read file" in err.getvalue()


def test_an_empty_scenario_still_gets_its_trailing_call(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, {"messages": []})
    assert code == 0 and len(json.loads(out)["calls"]) == 1


def test_summary_omits_history_arrays(tmp_path: Path) -> None:
    scenario = {"messages": [{"role": "user", "content": "hi"}]}
    _, out, _ = run(tmp_path, scenario, "--summary")
    call = json.loads(out)["calls"][0]
    assert "history" not in call["pairing"] and "tokens" in call


def test_write_spills_into_spill_dir_requires_it_empty(tmp_path: Path) -> None:
    spill = tmp_path / "spills"
    spill.mkdir()
    (spill / "old.txt").write_text("x")
    scenario = {"config": {"spill_dir": str(spill)}, "messages": []}
    code, _, err = run(tmp_path, scenario, "--write-spills")
    assert code == 2 and "must be absent or empty" in err


def test_write_spills_without_dir_writes_into_spill_dir(tmp_path: Path) -> None:
    spill = tmp_path / "fresh"
    msgs = [{"role": "user", "content": "go"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "x", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "z" * 25000}]
    code, out, _ = run(tmp_path, {"config": {"spill_dir": str(spill)}, "messages": msgs},
                       "--write-spills")
    assert code == 0 and (spill / "budget_a_1.txt").read_bytes() == b"z" * 25000


def test_config_file_overrides_the_profile(tmp_path: Path) -> None:
    cfg = tmp_path / "p.json"
    cfg.write_text(json.dumps({"loop_mode": "coder"}))
    code, out, _ = run(tmp_path, {"messages": []}, "--config", str(cfg))
    assert code == 0 and json.loads(out)["effective_config"]["loop_mode"] == "coder"


def test_a_lone_surrogate_escape_becomes_one_replacement_character_as_go_decodes_it(
        tmp_path: Path) -> None:
    # Go's JSON decoder turns "\\ud800" into U+FFFD (3 valid bytes); Python would keep a lone
    # surrogate, which is not UTF-8 at all.
    text = '{"config": {}, "messages": [{"role": "user", "content": "a\\ud800b\\ud83d\\ude00"}]}'
    code, out, _ = run(tmp_path, text)
    sent = json.loads(out)["calls"][0]["budget"]["history"][0]
    assert code == 0 and sent == {"role": "user", "content": "a\ufffdb\U0001f600"}


def test_a_transcript_folder_is_simulated_like_its_zip(tmp_path: Path) -> None:
    from tests.importers import agent_fixtures as af

    task = tmp_path / "1758845000000"
    task.mkdir()
    (task / "api_conversation_history.json").write_text(json.dumps(af.cline_api()))
    (task / "ui_messages.json").write_text(json.dumps(af.cline_ui()))
    out, err = io.StringIO(), io.StringIO()
    assert main([str(task), "--profile", "none", "--summary"], out, err) == 0, err.getvalue()
    trace = json.loads(out.getvalue())
    assert len(trace["calls"]) == 4  # three answered calls and the trailing one
