"""Codex `config.toml` and OpenHands `[condenser]` exports and their imports by paste
(SPEC-agents §2.5.9): export then import gives back everything each format carries."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from ctxsim.pipeline.export import IMPORTERS, export_profile
from ctxsim.pipeline.export_agents import (
    codex_ignored_keys,
    import_codex,
    import_openhands,
    openhands_ignored_keys,
)
from ctxsim.pipeline.params import ParamError
from ctxsim.pipeline.profiles import resolve

FULL_CODEX = {"model": "gpt-5.2-codex", "model_context_window": 272000,
              "model_auto_compact_token_limit": 200000, "tool_output_token_limit": 12000}


def _one(profile: str, config: dict[str, Any]):
    (artefact,) = export_profile(resolve(profile, config))
    return artefact


def test_the_codex_export_is_the_documented_config_toml() -> None:
    artefact = _one("codex", {"codex_config": FULL_CODEX})
    assert artefact.filename == "config.toml"
    assert artefact.content == (
        'model = "gpt-5.2-codex"\n'
        "model_context_window = 272000\n"
        "model_auto_compact_token_limit = 200000\n"
        "tool_output_token_limit = 12000\n")
    # The Codex profiles count with o200k_base, which no Codex setting carries.
    assert artefact.left_out == ['counter = "o200k_base" (ctxsim\'s estimate only)']


@pytest.mark.parametrize("config", [
    FULL_CODEX,
    {"tool_output_token_limit": 0},
    {"model": 'odd "name" \\ with ünïcode'},
    {},
])
def test_codex_export_then_import_gives_back_codex_config(config: dict[str, Any]) -> None:
    for profile in ("codex", "codex-recorded"):
        artefact = _one(profile, {"codex_config": config})
        assert import_codex(artefact.content) == {"codex_config": config}
        assert IMPORTERS["codex"](artefact.content) == {"codex_config": config}


def test_codex_export_lists_what_codex_cannot_carry() -> None:
    artefact = _one("codex", {"codex_truncation_policy": {"mode": "bytes", "limit": 5},
                              "codex_user_message_budget": 100, "counter": "bytes4"})
    assert artefact.content.startswith("# codex_truncation_policy is a model-catalog field")
    assert tomllib.loads(artefact.content) == {}
    assert any(x.startswith("codex_truncation_policy") for x in artefact.left_out)
    assert "codex_user_message_budget = 100" in artefact.left_out
    assert any(x.startswith("counter") for x in artefact.left_out)


def test_codex_import_notes_other_keys_and_profile_tables() -> None:
    text = ('model = "o3"\napproval_policy = "never"\n'
            'model_auto_compact_token_limit_scope = "body_after_prefix"\n'
            '[profiles.fast]\nmodel = "gpt-5"\n')
    assert import_codex(text) == {"codex_config": {"model": "o3"}}
    notes = codex_ignored_keys(text)
    assert any("approval_policy" in n for n in notes)
    assert any("model_auto_compact_token_limit_scope" in n for n in notes)
    assert any("[profiles.fast]" in n and "not merged" in n for n in notes)


@pytest.mark.parametrize(("text", "field"), [
    ('model_context_window = "272000"\n', "model_context_window"),
    ("tool_output_token_limit = 1.5\n", "tool_output_token_limit"),
    ("model_context_window = 0\n", "model_context_window"),
    ("model = \n", "invalid TOML"),
])
def test_codex_import_rejects_bad_values_by_field(text: str, field: str) -> None:
    with pytest.raises(ParamError) as info:
        import_codex(text)
    assert field in str(info.value)


def test_the_openhands_export_is_a_condenser_table_and_the_llm_limit() -> None:
    artefact = _one("openhands", {"openhands_condenser_config": {"type": "recent"}})
    assert artefact.content == ('[condenser]\ntype = "recent"\nkeep_first = 1\nmax_events = 100\n'
                                "\n[llm]\nmax_message_chars = 30000\n")
    assert artefact.left_out == ["openhands_request_over_tokens = 200000"]


@pytest.mark.parametrize("condenser", [
    {"type": "noop"},
    {"type": "observation_masking", "attention_window": 7},
    {"type": "recent", "keep_first": 0, "max_events": 3},
    {"type": "amortized", "max_size": 40, "keep_first": 2},
    {"type": "conversation_window"},
    {"type": "llm", "llm_config": "condenser", "keep_first": 4, "max_size": 120,
     "max_event_length": 500},
    {"type": "structured", "llm_config": "cheap", "keep_first": 1, "max_size": 10,
     "max_event_length": 10000},
    {"type": "llm_attention", "llm_config": "condenser", "max_size": 30, "keep_first": 3},
    {"type": "browser_output_masking", "attention_window": 2},
])
@pytest.mark.parametrize("chars", [30000, -1, 10])
def test_openhands_export_then_import_gives_back_the_condenser(condenser: dict[str, Any],
                                                                chars: int) -> None:
    artefact = _one("openhands", {"openhands_condenser_config": condenser,
                                  "openhands_max_message_chars": chars})
    assert import_openhands(artefact.content) == {"openhands_condenser_config": condenser,
                                                  "openhands_max_message_chars": chars}
    assert tomllib.loads(artefact.content)["condenser"]["type"] == condenser["type"]


def test_a_pipeline_is_left_out_with_the_server_hint() -> None:
    artefact = _one("openhands-app", {})
    assert "[condenser]" not in artefact.content
    assert import_openhands(artefact.content) == {"openhands_max_message_chars": 30000}
    assert artefact.left_out[0].startswith("openhands_condenser_config")
    assert any("enable_default_condenser" in n for n in artefact.notes)


def test_openhands_import_fills_defaults_and_notes_the_rest() -> None:
    text = '[core]\nmax_iterations = 5\n[llm]\nmodel = "x"\n[condenser]\ntype = "amortized"\n'
    assert import_openhands(text) == {"openhands_condenser_config": {
        "type": "amortized", "max_size": 100, "keep_first": 1}}
    notes = openhands_ignored_keys(text)
    assert "[core] (not a setting ctxsim simulates; ignored)" in notes
    assert "[llm] model (ignored)" in notes


@pytest.mark.parametrize(("text", "field"), [
    ('[condenser]\ntype = "amortized"\nmax_size = 4\nkeep_first = 2\n', "keep_first"),
    ('[condenser]\ntype = "recent"\nmax_size = 3\n', "max_size"),
    ('[condenser]\ntype = "magic"\n', "unknown condenser type"),
    ('[condenser]\ntype = "observation_masking"\nattention_window = 0\n', "attention_window"),
    ('[llm]\nmax_message_chars = "many"\n', "max_message_chars"),
])
def test_openhands_import_rejects_what_openhands_would(text: str, field: str) -> None:
    with pytest.raises(ParamError) as info:
        import_openhands(text)
    assert field in str(info.value)


def test_the_toml_writer_writes_booleans_and_leaves_unset_keys_out() -> None:
    """tomli-w writes the documents: `true`/`false` (a hand-written `str(True)` wrote the
    invalid `True`), and a None (TOML has no null) is left out, which the tools read as unset."""
    from ctxsim.pipeline.export_agents import _toml

    doc = {"flag": True, "table": {"off": False, "unset": None, "n": 3, "s": 'a "q"'}}
    text = _toml(doc)
    assert "flag = true" in text and "off = false" in text and "True" not in text
    assert tomllib.loads(text) == {"flag": True, "table": {"off": False, "n": 3, "s": 'a "q"'}}


@pytest.mark.parametrize("kind", ["llm", "structured", "llm_attention"])
def test_an_llm_condenser_without_its_llm_config_exports_valid_toml(kind) -> None:
    artefact = _one("openhands", {"openhands_condenser_config": {"type": kind}})
    doc = tomllib.loads(artefact.content)  # a hand-written `llm_config = None` did not parse
    assert "llm_config" not in doc["condenser"]
    assert any("needs llm_config" in n for n in artefact.notes)
    condenser = import_openhands(artefact.content)["openhands_condenser_config"]
    assert condenser["type"] == kind


def test_every_builtin_profiles_toml_exports_parse() -> None:
    from ctxsim.pipeline.profiles import PROFILES

    for name in PROFILES:
        for artefact in export_profile(resolve(name)):
            if artefact.filename.endswith(".toml"):
                tomllib.loads(artefact.content)


HUGE = "9" * 5000  # more digits than Python converts (sys.get_int_max_str_digits: 4300)


@pytest.mark.parametrize(("reader", "text", "field"), [
    (import_codex, f"model = \"o3\"\nmodel_context_window = {HUGE}\n",
     "config.toml model_context_window"),
    (import_openhands, f'[condenser]\ntype = "recent"\n\n[llm]\nmax_message_chars = {HUGE}\n',
     "config.toml [llm] max_message_chars"),
    (import_openhands, f'[condenser]\ntype = "recent"\n"max_events" = {HUGE}\n',
     "config.toml [condenser] max_events"),
])
def test_an_integer_of_thousands_of_digits_names_its_field(reader, text: str,
                                                          field: str) -> None:
    """Issue 28 item 11: tomllib raises a plain ValueError past 4,300 digits (a 500)."""
    with pytest.raises(ParamError) as info:
        reader(text)
    assert info.value.errors == {field: "the integer is too long (more than 4300 digits)"}
