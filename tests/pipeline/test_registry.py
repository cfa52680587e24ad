"""Every stage describes its own report: the StageDef contract the pages and exports rely on."""

from __future__ import annotations

import pytest

from ctxsim.generator import generate_session
from ctxsim.pipeline.export import FORMATS, export_profile
from ctxsim.pipeline.params import PARAMS
from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.registry import (
    FAMILIES,
    STAGES,
    exported_params,
    family_params,
    instructions_of,
    no_activity,
)
from ctxsim.pipeline.replay import Replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.pipeline.stages import ReplayFacts

SESSION = generate_session(16, seed=5, oversize_every=4)


def test_every_stage_names_a_known_tool_with_an_export_format() -> None:
    for stage in STAGES.values():
        assert stage.family in FAMILIES and stage.family in FORMATS
    assert set(FAMILIES) == set(FORMATS)


def test_a_tool_exports_only_parameters_it_has_and_every_parameter_is_declared() -> None:
    for family in FAMILIES:
        assert set(exported_params(family)) <= set(family_params(family)) <= set(PARAMS)
    for stage in STAGES.values():
        assert set(stage.exported) <= set(stage.params)


@pytest.mark.parametrize("name", list(STAGES))
def test_each_stage_reads_its_own_reports_at_every_call_and_over_the_replay(name: str) -> None:
    stage = STAGES[name]
    config = resolve("none", {}, stages=[[name, stage.phases[-1]]])
    calls = list(Replay(SESSION.messages, config, NullSpillSink()).calls())
    reports = []
    for call in calls:
        for run in call.stages:
            assert run.stage == name
            assert stage.activity(run.report) >= 0
            assert isinstance(stage.describe(run.report), str) and stage.describe(run.report)
            reports.append(run.report)
    largest = max(len(m.content) for m in SESSION.messages if m.role == "tool")
    facts = ReplayFacts(tuple(reports), tuple(c.loop_turn for c in calls), config.values,
                        largest)
    note = stage.quiet_note(facts)
    fired = any(stage.activity(r) for r in reports)
    if note is not None:
        assert note.endswith(".")
    if stage.limit_line is not None:
        label, _ = stage.limit_line(config.values)
        assert label
    if stage.activity is not no_activity and not fired:  # a stage that never fired says why
        assert note is not None


def test_a_quiet_limit_says_why_with_the_defaults_of_the_parameter_table() -> None:
    facts = ReplayFacts(({}, {}), (0, 1), {}, 10)
    assert "loop turn 2" in STAGES["microcompact"].quiet_note(facts)
    assert "over 20000 bytes" in STAGES["budget"].quiet_note(facts)
    assert "toolContextCount 0" in STAGES["tool_context"].quiet_note(facts)


def test_only_the_gateway_adds_its_instructions_to_every_prompt() -> None:
    values = {"systemInstructions": "Be brief."}
    assert instructions_of((("context_limit", "gateway"),), values) == "Be brief."
    assert instructions_of((("clear_tool_uses", "gateway"),), values) == ""


def test_a_stacked_profile_exports_one_artefact_per_tool_in_stage_order() -> None:
    tools = [e.tool for e in export_profile(resolve("chatcli-aivax"))]
    assert tools == ["chatcli", "aivax"]
