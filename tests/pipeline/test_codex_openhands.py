"""Codex CLI and OpenHands stages (SPEC-agents §2.5.4–§2.5.6) through the real `simulate`.

Golden files (tests/pipeline/golden/agents, hand-derived from the worked examples and test
scenarios 12–18) and the shared reference cases 12a, 15a, 17b, 18a, 22 are compared with the rule
of `reference/agents/README.md` (`test_agents_reference_cases.compare`); outputs too large for
a small file are built here.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctxsim.pipeline.cli import main
from tests.pipeline.test_agents_reference_cases import compare
from tests.shared import requires_shared, shared_files

GOLDEN = Path(__file__).parent / "golden" / "agents"
MINE = ("codex_", "openhands_")
GOLDEN_CASES = sorted(p for p in GOLDEN.glob("*.input.json") if p.name.startswith(MINE))
ERROR_CASES = sorted(p for p in (GOLDEN / "errors").glob("*.input.json")
                     if p.name.startswith(MINE))
REFERENCE_CASES = [p for p in shared_files("reference/agents", "*.input.json")
                   if p.name.split("_")[0] in ("12a", "15a", "17b", "18a", "22")]


def simulate_file(path: Path) -> tuple[int, dict[str, Any] | None, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(path)], out, err)
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()


def _expected(case: Path) -> dict[str, Any]:
    return json.loads(case.with_name(case.name.replace(".input.", ".expected.")).read_text())


def _name(p: Path) -> str:
    return p.name.split(".")[0]


@pytest.mark.parametrize("case", GOLDEN_CASES, ids=_name)
def test_it_reproduces_the_golden_scenario(case: Path) -> None:
    code, got, err = simulate_file(case)
    assert code == 0, err
    compare(_expected(case), got)


@pytest.mark.parametrize("case", ERROR_CASES, ids=_name)
def test_it_rejects_the_bad_scenario_with_one_line(case: Path) -> None:
    expected = _expected(case)
    code, _, err = simulate_file(case)
    assert code == expected["exit_code"]
    assert err.count("\n") == 1 and expected["stderr_contains"] in err


@requires_shared
@pytest.mark.parametrize("case", REFERENCE_CASES, ids=_name)
def test_it_reproduces_the_shared_reference_case(case: Path) -> None:
    code, got, err = simulate_file(case)
    assert code == 0, err
    compare(_expected(case), got)


@requires_shared
def test_all_five_reference_cases_are_found() -> None:
    assert len(REFERENCE_CASES) == 5


def test_the_golden_folder_holds_every_case() -> None:
    assert len(GOLDEN_CASES) >= 18 and len(ERROR_CASES) >= 3


# --- cases with large contents, built here -------------------------------------------------

def _run(tmp_path: Path, scenario: dict[str, Any]) -> dict[str, Any]:
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario, ensure_ascii=False))
    code, got, err = simulate_file(path)
    assert code == 0, err
    assert got is not None
    return got


def _dispatch_scenario(contents: list[str], config: dict[str, Any],
                       metas: list[dict[str, Any] | None] | None = None) -> dict[str, Any]:
    calls = [{"id": f"call_{k}", "type": "function",
              "function": {"name": "shell", "arguments": "{}"}} for k in range(len(contents))]
    tools = []
    for k, text in enumerate(contents):
        m: dict[str, Any] = {"role": "tool", "tool_call_id": f"call_{k}", "content": text}
        if metas and metas[k]:
            m["meta"] = metas[k]
        tools.append(m)
    return {"stages": [["codex_tool_output", "dispatch"]],
            "config": {"counter": "bytes4", **config},
            "messages": [{"role": "user", "content": "go"},
                         {"role": "assistant", "content": "", "tool_calls": calls}, *tools,
                         {"role": "assistant", "content": "done"}]}


def _results(trace: dict[str, Any]) -> list[str]:
    return [m["content"] for m in trace["final_history"] if m["role"] == "tool"]


def test_the_default_gpt5_budget_is_12000_bytes(tmp_path: Path) -> None:
    # §2.5.4 example 5: bytes 10 000 × 1.2; one byte over keeps 6 000 + 6 000 bytes.
    got = _run(tmp_path, _dispatch_scenario(["a" * 12000, "a" * 12001],
                                            {"codex_config": {"model": "gpt-5"}}))
    assert _results(got) == ["a" * 12000, "a" * 6000 + "\u20261 chars truncated\u2026" + "a" * 6000]
    assert [d["history_budget"] for d in got["dispatch"]] == [{"mode": "bytes", "limit": 12000}] * 2
    assert [d["policy_source"] for d in got["dispatch"]] == ["model", "model"]


RECORDED = {"codex_truncation_policy": {"mode": "bytes", "limit": 4000}}


@pytest.mark.parametrize(("config", "source", "budget", "result"), [
    # the rollout's turn_context says bytes 4000: 4 800 bytes although gpt-5.2-codex is tokens
    ({}, "recorded", {"mode": "bytes", "limit": 4800},
     "a" * 2400 + "\u2026200 chars truncated\u2026" + "a" * 2400),
    # the parameter overrides the recorded policy
    ({"codex_truncation_policy": {"mode": "tokens", "limit": 10}}, "param",
     {"mode": "tokens", "limit": 12}, "a" * 24 + "\u20261238 tokens truncated\u2026" + "a" * 24),
    # tool_output_token_limit replaces the limit and keeps the recorded bytes mode: 4 × 100
    ({"codex_config": {"model": "gpt-5.2-codex", "tool_output_token_limit": 100}}, "recorded",
     {"mode": "bytes", "limit": 480}, "a" * 240 + "\u20264520 chars truncated\u2026" + "a" * 240),
    # without the recorded policy the model table applies: tokens 10 000, 48 000 bytes
    ({"codex_use_recorded_policy": False}, "model", {"mode": "tokens", "limit": 12000},
     "a" * 5000),
], ids=["recorded", "param", "limit-keeps-mode", "model-table"])
def test_the_recorded_policy_comes_first(tmp_path: Path, config: dict[str, Any], source: str,
                                         budget: dict[str, Any], result: str) -> None:
    # Scenario 14.
    config = {"codex_config": {"model": "gpt-5.2-codex"}, **config}
    got = _run(tmp_path, _dispatch_scenario(["a" * 5000], config, [RECORDED]))
    (entry,) = got["dispatch"]
    assert (entry["policy_source"], entry["history_budget"]) == (source, budget)
    assert _results(got) == [result]


def test_an_unknown_model_takes_the_default_row(tmp_path: Path) -> None:
    got = _run(tmp_path, _dispatch_scenario(["a" * 13000], {"codex_config": {"model": "llama"}}))
    (entry,) = got["dispatch"]
    assert entry["policy_source"] == "default"
    assert entry["policy"] == {"mode": "bytes", "limit": 10000}


@pytest.mark.parametrize(("config", "limit"), [
    ({"model": "gpt-5.2-codex"}, 244800),
    ({"model": "gpt-5.2-codex", "model_auto_compact_token_limit": 100000}, 100000),
    ({"model": "gpt-5.2-codex", "model_auto_compact_token_limit": 300000}, 244800),
    ({"model": "unknown-model"}, None),
])
@pytest.mark.parametrize("semantics", ["min", "override"])
def test_the_compaction_limit_is_90_percent_of_the_window(
        tmp_path: Path, config: dict[str, Any], limit: int | None, semantics: str) -> None:
    # §2.5.5 example 1: the configured limit can only lower 90 % under `min`.
    if semantics == "override" and config.get("model_auto_compact_token_limit"):
        limit = config["model_auto_compact_token_limit"]
    got = _run(tmp_path, {"stages": [["codex_autocompact", "outgoing"]],
                          "config": {"codex_config": config, "codex_limit_semantics": semantics},
                          "messages": [{"role": "user", "content": "hi"}]})
    report = got["calls"][0]["codex_autocompact"]
    assert report["limit"] == limit
    assert report["window"] == (None if config["model"] == "unknown-model" else 272000)
