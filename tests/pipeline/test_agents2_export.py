"""The part-2 agents' own configuration files (SPEC-agents-2): each profile exports as its
agent's file, and importing the file gives back what it carries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ctxsim.pipeline.export import IMPORTERS, export_profile
from ctxsim.pipeline.export_agents2 import parse_flat_yaml, yaml_scalar
from ctxsim.pipeline.params import ParamError
from ctxsim.pipeline.profiles import resolve


def one(profile: str, config: dict[str, Any] | None = None):
    (artefact,) = export_profile(resolve(profile, config or {}))
    return artefact


def test_gemini_cli_settings_json() -> None:
    a = one("gemini-cli", {"gemini_compression_threshold": 0.7,
                           "gemini_mask_protect_latest_turn": False})
    assert a.filename == "settings.json"
    assert json.loads(a.content) == {
        "model": {"compressionThreshold": 0.7},
        "tools": {"truncateToolOutputThreshold": 40000},
        "contextManagement": {"tools": {"outputMasking": {
            "protectionThresholdTokens": 50000, "minPrunableThresholdTokens": 30000,
            "protectLatestTurn": False}}}}
    back = IMPORTERS["gemini-cli"](a.content)
    assert back["gemini_compression_threshold"] == 0.7
    assert back["gemini_mask_protect_latest_turn"] is False


def test_a_bad_gemini_setting_is_named_by_its_path() -> None:
    with pytest.raises(ParamError) as exc:
        IMPORTERS["gemini-cli"]('{"model": {"compressionThreshold": 2}}')
    assert "settings.json model.compressionThreshold" in exc.value.errors


def test_openhands_v1_condenser_arguments() -> None:
    a = one("openhands-v1", {"openhands_v1_max_size": 80, "openhands_v1_keep_first": 4,
                             "openhands_v1_max_tokens": 150000})
    assert json.loads(a.content) == {"kind": "LLMSummarizingCondenser", "max_size": 80,
                                     "keep_first": 4, "max_tokens": 150000,
                                     "minimum_progress": 0.1}
    assert IMPORTERS["openhands-v1"](a.content) == {
        "openhands_v1_max_size": 80, "openhands_v1_keep_first": 4,
        "openhands_v1_max_tokens": 150000, "openhands_v1_minimum_progress": 0.1}
    with pytest.raises(ParamError) as exc:
        IMPORTERS["openhands-v1"]('{"max_size": 80, "keep_last": 3}')
    assert exc.value.errors == {"keep_last": "unknown key"}


def test_roo_code_settings_export_and_cline() -> None:
    a = one("roo-code", {"roo_condense_percent": 75, "roo_context_window": 128000})
    assert json.loads(a.content) == {"globalSettings": {"autoCondenseContext": True,
                                                        "autoCondenseContextPercent": 75}}
    assert "roo_context_window = 128000" in a.left_out
    assert IMPORTERS["roo-code"](a.content) == {"roo_auto_condense": True,
                                                "roo_condense_percent": 75}
    c = one("cline", {"cline_context_window": 64000})
    assert json.loads(c.content) == {"useAutoCondense": False}
    assert c.left_out == ["cline_context_window = 64000"]
    assert IMPORTERS["cline"](c.content) == {}
    with pytest.raises(ParamError):
        IMPORTERS["cline"]('{"useAutoCondense": true}')


def test_aider_conf_yml() -> None:
    a = one("aider", {"aider_max_chat_history_tokens": 4096})
    assert a.filename == ".aider.conf.yml"
    assert "max-chat-history-tokens: 4096\n" in a.content
    assert IMPORTERS["aider"](a.content) == {"aider_max_chat_history_tokens": 4096}
    unset = one("aider")
    assert IMPORTERS["aider"](unset.content) == {}


def test_the_flat_yaml_emitter_and_reader_agree() -> None:
    for value in (0, 8192, -3, 1.5, True, False, None, "gpt-4o", "yes", "a: b", "12",
                  "with \"quotes\" and é", "1e5", ""):
        assert parse_flat_yaml(f"key: {yaml_scalar(value)}\n", "f") == {"key": value}, value
    doc = parse_flat_yaml("# comment\nmodel: gpt-4o  # trailing\n\nmap-tokens: 1024\n", "f")
    assert doc == {"model": "gpt-4o", "map-tokens": 1024}
    with pytest.raises(ParamError) as exc:
        parse_flat_yaml("read:\n  - a.py\n", "f")
    assert "f line 2" in exc.value.errors
    with pytest.raises(ParamError):
        parse_flat_yaml("read: [a.py]\n", "f")


def test_opencode_json() -> None:
    a = one("opencode", {"opencode_reserved": 10000, "opencode_keep_tokens": 20000,
                         "opencode_auto": False})
    assert json.loads(a.content) == {"$schema": "https://opencode.ai/config.json",
                                     "compaction": {"auto": False, "prune": True,
                                                    "reserved": 10000,
                                                    "keep": {"tokens": 20000}}}
    assert IMPORTERS["opencode"](a.content) == {
        "opencode_auto": False, "opencode_prune": True, "opencode_reserved": 10000,
        "opencode_keep_tokens": 20000}


def test_mini_swe_agent_has_no_setting_and_says_so() -> None:
    a = one("mini-swe-agent", {"mini_swe_output_limit": 20000})
    assert "output | length < 20000" in a.content
    with pytest.raises(ParamError):
        IMPORTERS["mini-swe-agent"](a.content)
