"""The scenario format (SPEC §6): a thin wrapper over the engine's strict scenario parser,
so a scenario imports exactly as `simulate` reads it."""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Session
from ctxsim.pipeline.scenario import ScenarioError, is_scenario, parse_scenario_data

from .errors import TranscriptError
from .source import Probe, Source

NAME = "scenario"

# A bare {"messages": [...]} is a chat transcript; a scenario shows at least one of its own keys.
SCENARIO_ONLY_KEYS = frozenset({"config", "profile", "stages", "description", "response_schema"})


def detect(probe: Probe) -> bool | str:
    document = probe.document()
    if is_scenario(document) and SCENARIO_ONLY_KEYS & set(document):
        return True
    return "not an object of scenario keys with `config` and `messages`"


def parse(source: Source) -> list[Session]:
    document = source.document()
    try:
        scenario = parse_scenario_data(document)
    except ScenarioError as error:
        raise TranscriptError(f"scenario {error}") from None
    meta: dict[str, Any] = {"config": scenario.config}
    if scenario.profile:
        meta["profile"] = scenario.profile
    if scenario.stages is not None:
        meta["stages"] = scenario.stages
    return [Session(
        format=NAME,
        title=scenario.description.strip().splitlines()[0][:80]
        if scenario.description.strip() else "scenario",
        messages=scenario.messages,
        tools=scenario.tools,
        response_schema=scenario.response_schema,
        meta=meta,
    )]
