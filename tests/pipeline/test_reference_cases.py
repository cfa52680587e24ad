"""Golden tests: every reference case, through the real `simulate`, compared key by key."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest

from ctxsim.cli import main
from tests.shared import requires_shared, shared_files

CHATCLI_CASES = shared_files("reference/chatcli", "*.input.json")
GATEWAY_CASES = shared_files("reference/gateway", "*.input.json")


def assert_contains(expected: Any, got: Any, where: str = "") -> None:
    """Every expected key is present and equal; extra keys in `got` are allowed."""
    if isinstance(expected, dict):
        assert isinstance(got, dict), f"{where}: expected an object"
        for key, value in expected.items():
            assert key in got, f"{where}.{key}: missing"
            assert_contains(value, got[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{where}: length differs"
        for n, (a, b) in enumerate(zip(expected, got, strict=True)):
            assert_contains(a, b, f"{where}[{n}]")
    else:
        assert type(got) is type(expected) and got == expected, f"{where}: {got!r} != {expected!r}"


def simulate(case: Path, spill_dir: Path) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(case), "--write-spills", str(spill_dir)], out, err)
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def _expected(case: Path) -> dict[str, Any]:
    return json.loads(case.with_name(case.name.replace(".input.", ".expected.")).read_text())


@requires_shared
@pytest.mark.parametrize("case", CHATCLI_CASES, ids=lambda p: p.name.split(".")[0])
def test_it_reproduces_the_chatcli_reference_trace(case: Path, tmp_path: Path) -> None:
    expected = _expected(case)
    got = simulate(case, tmp_path)
    assert_contains(expected, got)
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(f["name"] for f in expected["spilled_files"])
    for spilled in expected["spilled_files"]:
        data = (tmp_path / spilled["name"]).read_bytes()
        want = (base64.b64decode(spilled["content_b64"]) if "content_b64" in spilled
                else spilled["content"].encode("utf-8"))
        assert data == want, spilled["name"]


@requires_shared
@pytest.mark.parametrize("case", GATEWAY_CASES, ids=lambda p: p.name.split(".")[0])
def test_it_reproduces_the_gateway_reference_calls(case: Path, tmp_path: Path) -> None:
    assert_contains(_expected(case), simulate(case, tmp_path))


@requires_shared
def test_the_reference_folders_are_not_empty() -> None:
    assert CHATCLI_CASES and GATEWAY_CASES
