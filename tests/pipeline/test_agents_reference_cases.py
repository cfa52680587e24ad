"""The agent reference cases (shared/reference/agents), through the real `simulate`.

Read in place; compared by the README's subset rule: messages on role, content, tool_calls,
tool_call_id and is_error only; `compactions` on stage, call_index and kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.pipeline.test_reference_cases import assert_contains, simulate
from tests.shared import requires_shared, shared_files

# Cases of the Claude Code and Anthropic stages; the Codex and OpenHands ones run with
# their stages.
MINE = ("01", "04a", "06b", "07", "09a", "19a", "21")
CASES = [p for p in shared_files("reference/agents", "*.input.json")
         if p.name.split("_")[0] in MINE]
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "is_error")


def message_view(m: dict[str, Any]) -> dict[str, Any]:
    return {"role": m["role"], "content": m.get("content", ""),
            "tool_calls": m.get("tool_calls", []), "tool_call_id": m.get("tool_call_id", ""),
            "is_error": m.get("is_error", False)}


def normalise(value: Any, key: str = "") -> Any:
    """Messages (inside `history` / `final_history`) reduced to the compared keys."""
    if key in ("history", "final_history") and isinstance(value, list):
        return [message_view(m) for m in value]
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def compare(expected: dict[str, Any], got: dict[str, Any]) -> None:
    expected, got = normalise(expected), normalise(got)
    for key in ("calls", "dispatch", "final_history"):
        if key in expected:
            want = expected[key]
            if key == "calls":
                assert len(got["calls"]) == len(want), "calls: length differs"
                for n, (w, g) in enumerate(zip(want, got["calls"], strict=True)):
                    assert_contains(w, g, f"calls[{n}]")
            else:
                assert_contains(want, got[key], key)
    if "spilled_files" in expected:
        assert [{"path": f["path"], "size": f["size"]} for f in got["spilled_files"]] == [
            {"path": f["path"], "size": f["size"]} for f in expected["spilled_files"]]
    if "compactions" in expected:
        assert [{k: e[k] for k in ("stage", "call_index", "kind")}
                for e in got.get("compactions", [])] == expected["compactions"]


@requires_shared
@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name.split(".")[0])
def test_it_reproduces_the_agent_reference_case(case: Path, tmp_path: Path) -> None:
    expected = json.loads(case.with_name(case.name.replace(".input.", ".expected.")).read_text())
    compare(expected, simulate(case, tmp_path))


@requires_shared
def test_every_claude_code_and_anthropic_reference_case_is_present() -> None:
    assert sorted(p.name.split("_")[0] for p in CASES) == sorted(MINE)
