"""Codex 0.45+ shell results: the importer keeps the text the model read, and the JSON."""

import json

from ctxsim.importers import load_sessions
from ctxsim.importers.codex_shell_text import shell_text
from tests.shared import requires_shared, shared_files


def _recorded(output: str, code: int = 0, seconds: float = 0.1) -> str:
    return json.dumps({"output": output, "metadata": {"exit_code": code,
                                                      "duration_seconds": seconds}})


def test_a_recorded_shell_result_becomes_the_text_the_model_was_sent():
    assert shell_text(_recorded("a\nb\n", 1, 0.3)) == (
        "Exit code: 1\nWall time: 0.3 seconds\nOutput:\na\nb\n")
    # Rust prints a whole f32 without its fraction.
    assert shell_text(_recorded("", 0, 2.0)) == "Exit code: 0\nWall time: 2 seconds\nOutput:\n"


def test_the_total_lines_header_moves_above_output_and_loses_one_blank_line():
    cut = "Total output lines: 295\n\n\n  const x = 1\n[... omitted 39 of 295 lines ...]"
    assert shell_text(_recorded(cut)) == (
        "Exit code: 0\nWall time: 0.1 seconds\nTotal output lines: 295\nOutput:\n"
        "\n  const x = 1\n[... omitted 39 of 295 lines ...]")
    # Not a number: the output is left as it is.
    odd = "Total output lines: many\nx"
    assert shell_text(_recorded(odd)).endswith("Output:\n" + odd)


def test_anything_but_the_recorded_shape_is_not_rewritten():
    for raw in ("plain text", "{not json", json.dumps({"output": "x"}),
                json.dumps({"output": 3, "metadata": {"exit_code": 0, "duration_seconds": 1}}),
                json.dumps({"output": "x", "metadata": {"exit_code": 0.5,
                                                        "duration_seconds": 1}}),
                json.dumps({"output": "x", "metadata": {"exit_code": True,
                                                        "duration_seconds": 1}})):
        assert shell_text(raw) is None, raw


def _rollout(tmp_path, version: str, model: str, output: str):
    lines = [
        {"type": "session_meta", "payload": {"id": "s", "cli_version": version}},
        {"type": "turn_context", "payload": {"model": model}},
        {"type": "response_item", "payload": {"type": "message", "role": "user",
                                              "content": [{"type": "input_text",
                                                           "text": "go"}]}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                              "call_id": "c1", "arguments": "{}"}},
        {"type": "response_item", "payload": {"type": "function_call_output",
                                              "call_id": "c1", "output": output}},
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps({"timestamp": "2025-11-17T00:00:00Z", **x})
                              for x in lines) + "\n")
    (session,) = load_sessions(path)
    return next(m for m in session.messages if m.role == "tool")


def test_the_import_keys_the_rewrite_on_the_release_and_the_model(tmp_path):
    raw = _recorded("boom\n", 2, 0.5)
    sent = _rollout(tmp_path, "0.58.0", "gpt-5.1-codex", raw)
    assert sent.content.decode() == "Exit code: 2\nWall time: 0.5 seconds\nOutput:\nboom\n"
    assert sent.meta["recorded_output"] == raw  # the page can still show the JSON
    assert sent.is_error and sent.error_code == "ExitCode:2"
    # Before 0.45 the model read the JSON itself; a model without the freeform tool too.
    assert _rollout(tmp_path, "0.40.0", "gpt-5-codex", raw).content.decode() == raw
    assert _rollout(tmp_path, "0.58.0", "gpt-5", raw).content.decode() == raw


@requires_shared
def test_the_shared_058_rollouts_shell_results_are_text_with_the_json_kept():
    paths = [p for p in shared_files("transcripts/codex-rollout", "*.jsonl")
             if "2025-11-17" in p.name]
    for path in paths:
        tools = [m for m in load_sessions(path)[0].messages if m.role == "tool"]
        rewritten = [m for m in tools if "recorded_output" in m.meta]
        assert len(rewritten) == 37  # every shell result of that rollout
        assert all(m.content.startswith(b"Exit code: ") for m in rewritten)
