"""The comparison rule of `reference/agents/README.md`, shared by the agent golden tests.

Every expected key must be present with an equal value (extra keys allowed); arrays have the
same length; messages inside `history` / `final_history` are compared on exactly `role`,
`content`, `tool_calls`, `tool_call_id` and `is_error`, with their defaults when absent.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from ctxsim.pipeline.cli import main

HISTORY_KEYS = ("history", "final_history")


def normal_message(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": m.get("role"),
        "content": m.get("content"),
        "tool_calls": m.get("tool_calls") or [],
        "tool_call_id": m.get("tool_call_id") or "",
        "is_error": bool(m.get("is_error", False)),
    }


def assert_matches(expected: Any, got: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{where}: expected an object, got {got!r}"
        for key, value in expected.items():
            assert key in got, f"{where}.{key}: missing"
            if key in HISTORY_KEYS and isinstance(value, list):
                assert isinstance(got[key], list), f"{where}.{key}: expected a list"
                want = [normal_message(m) for m in value]
                have = [normal_message(m) for m in got[key]]
                assert have == want, f"{where}.{key}: messages differ\n{have}\n!=\n{want}"
            else:
                assert_matches(value, got[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list), f"{where}: expected a list, got {got!r}"
        assert len(got) == len(expected), f"{where}: length {len(got)} != {len(expected)}"
        for n, (a, b) in enumerate(zip(expected, got, strict=True)):
            assert_matches(a, b, f"{where}[{n}]")
    else:
        assert type(got) is type(expected) and got == expected, \
            f"{where}: {got!r} != {expected!r}"


def simulate_file(path: Path, *extra: str) -> tuple[int, dict[str, Any] | None, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(path), *extra], out, err)
    return code, (json.loads(out.getvalue()) if code == 0 else None), err.getvalue()
