"""Codex CLI and OpenHands stages (SPEC-agents §2.5.4–§2.5.6) through the real `simulate`.

Their golden files (`golden/agents/codex_*.json`, `openhands_*.json`, hand-derived from the
worked examples and test scenarios 12–18) run in `test_agents_golden`; here the shared reference
cases 12a, 15a, 17b, 18a and 22 run, compared with the rule of `reference/agents/README.md`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctxsim.cli import main
from tests.pipeline.test_agents_reference_cases import compare
from tests.shared import requires_shared, shared_files

GOLDEN = Path(__file__).parent / "golden" / "agents"
REFERENCE_CASES = [p for p in shared_files("reference/agents", "*.input.json")
                   if p.name.split("_")[0] in ("12a", "15a", "17b", "18a", "22")]


def simulate_file(path: Path, *args: str) -> tuple[int, dict[str, Any] | None, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(path), *args], out, err)
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()


@requires_shared
@pytest.mark.parametrize("case", REFERENCE_CASES, ids=lambda p: p.name.split(".")[0])
def test_it_reproduces_the_shared_reference_case(case: Path) -> None:
    code, got, err = simulate_file(case)
    assert code == 0, err
    expected = json.loads(case.with_name(case.name.replace(".input.", ".expected.")).read_text())
    compare(expected, got)  # type: ignore[arg-type]


@requires_shared
def test_all_five_reference_cases_are_found() -> None:
    assert len(REFERENCE_CASES) == 5


def test_every_worked_example_of_codex_and_openhands_has_a_golden_file() -> None:
    names = {p.stem for p in GOLDEN.glob("*.json")}
    assert {
        # §2.5.4 examples 1-5, scenarios 12-14
        "codex_truncation_tokens_10", "codex_truncation_bytes_20", "codex_truncation_tokens_0",
        "codex_default_gpt5_budget", "codex_limit_override_utf8_tokens_model",
        "codex_limit_override_utf8_bytes_model", "codex_recorded_policy_precedence",
        # §2.5.5 examples 1-5, scenarios 15-16
        "codex_limit_arithmetic", "codex_autocompact_mid_turn", "codex_autocompact_pre_turn",
        "codex_user_message_budget", "codex_replacement_history_recorded",
        "codex_replacement_history_predict", "codex_boundary_only_placeholder",
        # §2.5.6 examples 1-5, scenarios 17-18
        "openhands_recent_v0", "openhands_masking_v0", "openhands_masking_plain",
        "openhands_amortized_rolling", "openhands_llm_placeholder",
        "openhands_conversation_window_request", "openhands_max_message_chars",
        "openhands_invalid_config",
    } <= names


def test_an_unknown_model_takes_the_table_default_row(tmp_path: Path) -> None:
    scenario = {
        "stages": [["codex_tool_output", "dispatch"]],
        "config": {"codex_config": {"model": "llama-3"}},
        "messages": [{"role": "user", "content": "go"},
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": "c", "type": "function",
                          "function": {"name": "shell", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": "c", "content": "ok"}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    code, got, err = simulate_file(path)
    assert code == 0, err
    (entry,) = got["dispatch"]  # type: ignore[index]
    assert entry["policy_source"] == "default"
    assert entry["policy"] == {"mode": "bytes", "limit": 10000}


def test_the_codex_profiles_count_with_the_tokenizer_of_openais_models() -> None:
    """issue 26: gpt-5-codex and the other models Codex runs use o200k_base."""
    from ctxsim.pipeline.profiles import default_profile_for, resolve

    for fmt in ("codex", "codex-legacy"):
        assert resolve(default_profile_for(fmt)).values["counter"] == "o200k_base"
    assert resolve("codex-recorded").values["counter"] == "o200k_base"
    assert resolve("claude-code").values["counter"] == "cl100k_base"
