"""Golden scenarios for the Claude Code and Anthropic stages (SPEC-agents §2.5.11, the worked
examples of §2.5.1–§2.5.3, §2.5.7, §2.5.8), run through the real `simulate`.

Each file in `golden/agents/` is `{description, scenario, expected}` or `{description,
scenario, cases: [{name, config, expected | expected_error}]}`; a case's `config` overrides
the scenario's. `expected` is compared by the reference cases' subset rule. Large contents are
written with three macros, expanded before the scenario is written out:
`{"$repeat": [text, n]}`, `{"$range": [format, start, stop]}` (`format.format(i)` for each i,
joined) and `{"$concat": [part, ...]}`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctxsim.cli import main
from tests.pipeline.test_agents_reference_cases import compare, normalise
from tests.pipeline.test_reference_cases import assert_contains

GOLDEN = Path(__file__).parent / "golden" / "agents"
FILES = sorted(GOLDEN.glob("*.json"))


def expand(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$repeat"}:
            text, n = value["$repeat"]
            return expand(text) * n
        if set(value) == {"$range"}:
            fmt, start, stop = value["$range"]
            return "".join(fmt.format(i) for i in range(start, stop))
        if set(value) == {"$concat"}:
            return "".join(expand(v) for v in value["$concat"])
        return {k: expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def cases() -> list[Any]:
    out = []
    for path in FILES:
        data = json.loads(path.read_text())
        variants = data.get("cases") or [{"name": "", "expected": data.get("expected")}]
        for case in variants:
            out.append(pytest.param(path, case, id=f"{path.stem}{'-' if case['name'] else ''}"
                                                   f"{case['name']}"))
    return out


def run_simulate(scenario: dict[str, Any], tmp_path: Path) -> tuple[int, str, str]:
    file = tmp_path / "scenario.json"
    file.write_text(json.dumps(scenario, ensure_ascii=False))
    spills = tmp_path / "spills"
    out, err = io.StringIO(), io.StringIO()
    code = main([str(file), "--write-spills", str(spills)], out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("path", "case"), cases())
def test_the_golden_scenario_reproduces_exactly(path: Path, case: dict[str, Any],
                                                tmp_path: Path) -> None:
    data = json.loads(path.read_text())
    scenario = expand(data["scenario"])
    scenario["config"] = {**scenario.get("config", {}), **expand(case.get("config", {}))}
    code, out, err = run_simulate(scenario, tmp_path)
    if "expected_error" in case:
        assert code == 2 and case["expected_error"] in err, err
        return
    assert code == 0, err
    got = json.loads(out)
    expected = expand(case["expected"])
    compare(expected, got)
    for key in ("effective_config", "recorded_compactions"):
        if key in expected:
            assert_contains(normalise(expected[key]), got[key], key)
    if "compactions_full" in expected:
        assert_contains(expected["compactions_full"], got["compactions"], "compactions")


def test_every_scenario_of_the_claude_code_and_anthropic_stages_has_a_golden_file() -> None:
    names = {p.stem for p in FILES}
    assert {"cc_bash_middle_shape", "cc_bash_persist_preview", "cc_env_parse_rules",
            "cc_mcp_truncate_and_error", "cc_persist_threshold_and_read_exempt",
            "cc_microcompact_time_gap", "cc_microcompact_persistence_and_recorded",
            "cc_autocompact_threshold_table", "cc_autocompact_placeholder_exact",
            "cc_autocompact_recorded_vs_predicted", "cc_autocompact_usage_token_source",
            "anthropic_clear_thinking_turns", "anthropic_compact_fold_and_export"} <= names
