"""Profiles are data; parameters are validated per field; stage lists respect phases."""

from __future__ import annotations

import pytest

from ctxsim.pipeline.params import PARAMS, ParamError
from ctxsim.pipeline.profiles import PROFILES, resolve
from ctxsim.pipeline.registry import PHASES, STAGES


def test_every_builtin_profile_resolves_and_respects_the_phase_order() -> None:
    for name in PROFILES:
        cfg = resolve(name)
        ranks = [PHASES.index(p) for _, p in cfg.stages]
        assert ranks == sorted(ranks)


def test_chatcli_aivax_stacks_client_then_gateway_stages() -> None:
    cfg = resolve("chatcli-aivax")
    assert [s for s, _ in cfg.stages] == ["tool_cap", "microcompact", "pairing", "budget",
                                          "tool_context", "context_limit"]
    assert cfg.values["contextMaximumSize"] == 32000 and cfg.values["ccr"] == "on"


def test_a_stage_list_out_of_phase_order_is_rejected_with_a_message() -> None:
    with pytest.raises(ParamError) as exc:
        resolve("chatcli", stages=[["budget", "outgoing"], ["pairing", "persistent"]])
    assert "phases run in the order" in exc.value.errors["stages"]


def test_a_stage_in_a_phase_it_does_not_declare_is_rejected() -> None:
    with pytest.raises(ParamError) as exc:
        resolve("none", stages=[["tool_context", "persistent"]])
    assert "cannot run in phase" in exc.value.errors["stages"]


def test_bad_values_get_one_message_per_field() -> None:
    with pytest.raises(ParamError) as exc:
        resolve("aivax", {"toolContextCount": -1, "contextOverflowAction": "Drop", "nope": 1})
    assert set(exc.value.errors) == {"toolContextCount", "contextOverflowAction", "nope"}


def test_parameters_of_other_profiles_are_noted_not_fatal() -> None:
    cfg = resolve("anthropic-clear-tool-uses", {"systemInstructions": "x", "ccr": "off"})
    assert any(w.startswith("systemInstructions is ignored") for w in cfg.warnings)
    with pytest.raises(ParamError):
        resolve("aivax", {"ccr": "sometimes"})


def test_every_stage_parameter_has_a_spec_with_label_and_help() -> None:
    for stage in STAGES.values():
        for name in stage.params:
            assert PARAMS[name].label and PARAMS[name].help


def test_env_values_are_free_strings_with_effective_values_reported() -> None:
    cfg = resolve("chatcli", {"env": {"CHATCLI_TOOL_RESULT_MAX_CHARS": "1_000"}})
    assert cfg.values["_env_effective"]["per_result_max_chars"] == 20000
    assert any("CHATCLI_TOOL_RESULT_MAX_CHARS" in w for w in cfg.warnings)


def test_the_form_specs_follow_the_stage_order_without_repeats() -> None:
    from ctxsim.pipeline.profiles import param_specs

    names = [p.name for p in param_specs(resolve("chatcli-aivax").stages)]
    assert names[:4] == ["counter", "image_rule", "loop_mode", "anchor_text"]
    assert len(names) == len(set(names)) and "toolContextCount" in names
