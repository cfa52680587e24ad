"""The part-2 agents' limits on the anchored token source (SPEC-agents §2.5.0.10), their eras
through the one era mechanism (SPEC-agents §2.5.0.11, `eras.py`), end to end from each new
format's importer fixture (SPEC-agents §2.5.0.7 for the recorded compactions).

Hand-made billed sessions (the provider of `test_token_model`) pin that a limit fires where
the bill reaches it, not at every later call, and that without usage `anchored` is the counter
exactly; the fixtures of `tests/importers` are loaded, replayed under their format's default
profile, and their trace checked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ctxsim.importers import load
from ctxsim.pipeline.eras import agent_rows, session_era
from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.params import PARAMS
from ctxsim.pipeline.profiles import default_profile_for, resolve
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.stages import gemini_compress
from ctxsim.pipeline.trace import build_trace
from ctxsim.pipeline.usage import call_recorded
from tests.importers import agent_fixtures as af
from tests.pipeline.helpers import ctx as make_ctx
from tests.pipeline.test_token_model import _billed, _session

# stage, profile, its token-source parameter, limits the hand-made sessions reach
AGENTS = (("gemini_compress", "gemini-cli", "gemini_token_source", {"gemini_token_limit": 60_000}),
          ("roo_condense", "roo-code", "roo_token_source", {"roo_context_window": 60_000,
                                                            "roo_condense_percent": 50}),
          ("cline_truncation", "cline", "cline_token_source", {"cline_context_window": 64_000}),
          ("opencode_compact", "opencode", "opencode_token_source",
           {"opencode_context_limit": 40_000, "opencode_max_output": 4_000}),
          ("openhands_v1_condenser", "openhands-v1", "openhands_v1_token_source",
           {"openhands_v1_max_tokens": 30_000}))
IDS = [a[1] for a in AGENTS]


def session(rounds: int, size: int) -> list[Message]:
    """`test_token_model`'s tool loop with a user prompt every fourth round (Gemini CLI
    splits its history at a user prompt)."""
    out: list[Message] = []
    for m in _session(rounds, size):
        out.append(m)
        if m.role == "tool" and m.tool_call_id and int(m.tool_call_id[1:]) % 4 == 3:
            out.append(Message.of("user", "go on"))
    return out


def reports(history, profile: str, stage: str, config: dict[str, Any]) -> list[dict[str, Any]]:
    rep = replay(history, profile, config)
    return [next(s.report for s in c.stages if s.stage == stage) for c in rep.calls()]


def bills(history) -> list[int]:
    return [call_recorded(history, i)["total_input"]
            for i, m in enumerate(history) if m.role == "assistant"]


@pytest.mark.parametrize("param", [a[2] for a in AGENTS])
def test_anchored_is_each_new_agents_default_and_counter_and_usage_stay_selectable(param):
    assert PARAMS[param].default == "anchored"
    assert PARAMS[param].choices == ("anchored", "counter", "usage")


@pytest.mark.parametrize(("stage", "profile", "param", "config"), AGENTS, ids=IDS)
def test_with_usage_the_limit_compares_the_bill_and_fires_once(stage, profile, param, config):
    history = _billed(session(28, 1_500))
    anchored = reports(history, profile, stage, config)
    counter = reports(history, profile, stage, {**config, param: "counter"})
    assert anchored[0]["token_source"] == "anchored" and anchored[0]["token_unit"] == "provider"
    assert counter[0]["token_unit"] == "counter"
    # The first call sends the raw history: its compared figure is its bill, in provider tokens
    # (the hand-made provider bills 9,000 + 1.25 × the estimate: far above ctxsim's count).
    assert anchored[0]["tokens_before"] == bills(history)[0] > counter[0]["tokens_before"]
    fired = [k for k, r in enumerate(anchored) if r.get("compacted")]
    by_counter = [k for k, r in enumerate(counter) if r.get("compacted")]
    assert fired, anchored[-1]
    assert not by_counter or by_counter[0] > fired[0]
    # No re-firing: the compared figure after a simulated compaction is the bill minus what
    # the profile removed, so the limit is not crossed again at the next call.
    assert all(b - a > 1 for a, b in zip(fired, fired[1:], strict=False)), fired


@pytest.mark.parametrize(("stage", "profile", "param", "config"), AGENTS, ids=IDS)
def test_without_usage_anchored_is_the_counter_exactly(stage, profile, param, config):
    history = session(24, 3_000)
    anchored = reports(history, profile, stage, config)
    counter = reports(history, profile, stage, {**config, param: "counter"})
    assert any(r.get("compacted") for r in counter)
    assert anchored == [{**r, "token_source": "anchored"} for r in counter]


# --- each new format, end to end -------------------------------------------------------------


def loaded(name: str, tmp_path: Path):
    path = tmp_path / name
    path.write_bytes(af.FIXTURES[name][0]())
    return load(path)


# fixture → the stage that compares a limit (None: the profile has none)
COMPARED = {"gemini-legacy.json": "gemini_compress", "gemini.jsonl": "gemini_compress",
            "openhands-v1-conversation.zip": "openhands_v1_condenser",
            "openhands-v1-output.jsonl": "openhands_v1_condenser",
            "codex-exec-with-rollout.zip": "codex_autocompact", "mini-v2.traj.json": None,
            "cline-task.zip": "cline_truncation", "cline-native.json": "cline_truncation",
            "roo-task.zip": "roo_condense", ".aider.chat.history.md": None,
            "opencode-export.json": "opencode_compact"}


@pytest.mark.parametrize("name", sorted(COMPARED))
def test_each_format_replays_under_its_profile_comparing_provider_tokens(name, tmp_path):
    result = loaded(name, tmp_path)
    session = result.sessions[0]
    profile = default_profile_for(result.format)
    rep = replay(session, profile)
    trace = build_trace(rep, summary=True)
    assert trace["effective_config"]["profile"] == profile != "chatcli"
    assert trace["token_model"]["method"] == "anchored"
    stage = COMPARED[name]
    if stage is None:
        return
    calls = list(rep.calls())
    first = next(c for c in calls if call_recorded(rep.messages, c.response_input_index))
    report = next(s.report for s in first.stages if s.stage == stage)
    assert report["token_source"] == "anchored" and report["token_unit"] == "provider"
    assert report["tokens_before"] == \
        call_recorded(rep.messages, first.response_input_index)["total_input"]


# fixture → (stage, profile) of its recorded compaction (SPEC-agents §2.5.0.7)
RECORDED = {"gemini.jsonl": ("gemini_compress", "gemini-cli"),
            "roo-task.zip": ("roo_condense", "roo-code")}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_a_recorded_compaction_shows_in_the_trace_as_the_spec_says(name, tmp_path):
    stage, profile = RECORDED[name]
    session = loaded(name, tmp_path).sessions[0]
    assert default_profile_for(session.format) == profile
    mode = {"gemini_compress": "gemini_mode", "roo_condense": "roo_mode"}[stage]
    # predict (the default): the agent compacted where ctxsim's prediction did not reach.
    trace = build_trace(replay(session, profile), summary=True)
    (recorded,) = trace["recorded_compactions"]
    at = recorded["call_index"]
    assert [(c["stage"], c["call_index"], c["kind"]) for c in trace["compactions"]] == [
        (stage, at, "recorded_not_predicted")]
    assert trace["calls"][at][stage]["recorded"] is True
    # recorded: the transcript's own compaction is replayed, at the same call.
    trace = build_trace(replay(session, profile, {mode: "recorded"}), summary=True)
    assert [(c["stage"], c["call_index"], c["kind"], c["summary_source"])
            for c in trace["compactions"]] == [(stage, at, "recorded", "recorded")]


# --- eras through RunConfig.for_session ------------------------------------------------------


def test_every_part2_era_row_cites_a_source_and_sets_valid_values():
    rows = agent_rows()
    assert {r.agent for r in rows} == {"gemini-cli", "roo-code"}
    for row in rows:
        assert row.sources and all(s[:2] == "D " for s in row.sources) and row.behaviour
        for name, value in row.params.items():
            assert PARAMS[name].default != value and PARAMS[name].clean(value) == value


def test_a_session_replayed_under_its_agents_profile_takes_the_named_release(tmp_path):
    session = loaded("gemini.jsonl", tmp_path).sessions[0]  # the file records no version
    current = build_trace(replay(session, "gemini-cli"), summary=True)
    assert current["effective_config"]["era"] == (
        "Gemini CLI, version not recorded: current behaviour (no release switch applies).")
    assert current["effective_config"]["gemini_compression_threshold"] == 0.5
    old = build_trace(replay(session, "gemini-cli", {"gemini_version": "0.14.2"}), summary=True)
    assert old["effective_config"]["era"].startswith(
        "Gemini CLI 0.14.2: that release's behaviour — Gemini CLI 0.13–0.16: compress at 20 %")
    assert old["effective_config"]["gemini_compression_threshold"] == 0.2
    assert old["calls"][0]["gemini_compress"]["limit"] == int(0.2 * 1_048_576)
    # defaults ← era ← profile ← explicit: a value given wins over the release's.
    mine = build_trace(replay(session, "gemini-cli", {"gemini_version": "0.14.2",
                                                      "gemini_compression_threshold": 0.9}),
                       summary=True)
    assert mine["effective_config"]["gemini_compression_threshold"] == 0.9
    # ... even a value given that equals the current default: the stage compares what the
    # page shows, not the release's 20 %.
    same = replay(session, "gemini-cli", {"gemini_version": "0.14.2",
                                          "gemini_compression_threshold": 0.5})
    report = next(s.report for s in next(iter(same.calls())).stages
                  if s.stage == "gemini_compress")
    assert report["limit"] == int(0.5 * 1_048_576)
    # Another agent's profile on the file is a what-if on current behaviour: no era.
    assert session_era("cline", "gemini-cli-jsonl", {}, {"gemini_version": "0.14.2"}) is None


def test_an_old_roo_release_condenses_in_its_own_form(tmp_path):
    session = loaded("roo-task.zip", tmp_path).sessions[0]
    trace = build_trace(replay(session, "roo-code", {"roo_version": "3.28.7"}), summary=True)
    assert trace["effective_config"]["roo_condense_style"] == "keep_last_3"
    assert "Roo Code ≤ 3.29: first message + summary + last 3 messages" in \
        trace["effective_config"]["era"]


def test_a_version_given_beside_an_era_resolved_without_it_still_applies(tmp_path):
    """The session page resolves the era from the file alone (`replays.state.era_of`): a
    `gemini_version` from the thresholds form then still picks the release's values."""
    session = loaded("gemini.jsonl", tmp_path).sessions[0]
    config = resolve("gemini-cli", {"gemini_version": "0.14.2"},
                     era=session_era("gemini-cli", session.format, session.meta))
    c = replace(make_ctx("gemini-cli"), params=config.values)
    assert gemini_compress.run(list(session.messages), c).report["limit"] == \
        int(0.2 * 1_048_576)
