"""The era table (SPEC-agents §2.5.0.11): a built-in agent profile replaying its own agent's
transcript takes the values of the release that wrote it; explicit values override them; a
stage leaves output its own era already shaped as it is.

Each row's switch has a small hand-made transcript here; `test_shared_transcripts_*` checks
the table on the real transcripts in `../shared`."""

from __future__ import annotations

import pytest

from ctxsim.importers import load_sessions
from ctxsim.pipeline.eras import ERA_TABLE, era_for, parse_version, session_era
from ctxsim.pipeline.messages import Message, Session
from ctxsim.pipeline.profiles import PROFILES, default_profile_for, resolve
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.stages._codex import truncate
from ctxsim.pipeline.stages.claude_code_tool_output import middle_truncate
from tests.pipeline.helpers import assistant, tool, user
from tests.shared import requires_shared, shared_files


def _claude(version: str | None, *messages: Message) -> Session:
    meta = {"version": version, "cwd": "/work/demo", "session_id": "sess-1"} if version else {}
    return Session("claude-code", "t", tuple(messages), meta=meta)


def _codex(version: str | None, *messages: Message, fmt: str = "codex") -> Session:
    meta = {"cli_version": version, "model": "gpt-5"} if version else {"model": "gpt-5"}
    return Session(fmt, "t", tuple(messages), meta=meta)


def _one_result(name: str, content: str) -> tuple[Message, ...]:
    return (user("go"), assistant("toolu_01", names={"toolu_01": name}),
            tool("toolu_01", content), user("next"))


def _sent_result(session: Session, profile: str | None = None, **config) -> str:
    """The tool result as the last call sent it."""
    rep = replay(session, profile or default_profile_for(session.format), config or None)
    last = list(rep.calls())[-1]
    return next(m for m in last.sent if m.role == "tool").content.decode()


# --- the per-version choice -------------------------------------------------------------------

def test_versions_parse_numerically_and_ignore_suffixes():
    assert parse_version("1.0.17") == (1, 0, 17)
    assert parse_version("0.100.0-alpha.2") == (0, 100)
    assert parse_version("2.1") == parse_version("2.1.0")
    assert parse_version("0.99.0") < parse_version("0.100.0")  # not a string comparison
    assert parse_version("unknown") is None and parse_version(None) is None


@pytest.mark.parametrize(("version", "expected"), [
    ("1.0.17", {"cc_bash_mode": "middle", "cc_persist_threshold_chars": None,
                "cc_mcp_mode": "error", "cc_microcompact_trigger": "off",
                "cc_summary_template": "v1"}),
    ("2.1.1", {"cc_bash_mode": "middle", "cc_persist_threshold_chars": None,
               "cc_mcp_mode": "error", "cc_microcompact_trigger": "off",
               "cc_summary_template": "v1", "cc_autocompact_buffer_tokens": 25000}),
    ("2.1.2", {"cc_persist_threshold_chars": 100000, "cc_microcompact_trigger": "off",
               "cc_summary_template": "v1", "cc_autocompact_buffer_tokens": 25000}),
    ("2.1.21", {"cc_persist_threshold_chars": 100000, "cc_microcompact_trigger": "off",
                "cc_summary_template": "v1"}),
    ("2.1.51", {"cc_microcompact_trigger": "off", "cc_summary_template": "v1"}),
    ("2.1.63", {"cc_summary_template": "v1"}),
    ("2.1.69", {}),
    ("2.1.239", {}),
])
def test_claude_code_values_by_version(version, expected):
    assert dict(era_for("claude-code", version).params) == expected


@pytest.mark.parametrize(("version", "expected"), [
    ("0.40.0", {"codex_output_truncation": "rollout", "codex_limit_semantics": "override"}),
    ("0.55.9", {"codex_output_truncation": "rollout", "codex_limit_semantics": "override"}),
    ("0.56.0", {"codex_limit_semantics": "override"}),
    ("0.99.0", {"codex_limit_semantics": "override"}),
    ("0.100.0", {}),
])
def test_codex_values_by_version(version, expected):
    assert dict(era_for("codex", version).params) == expected


def test_every_row_cites_a_source_and_names_a_known_parameter():
    from ctxsim.pipeline.params import PARAMS

    for row in ERA_TABLE:
        assert row.sources and all(s[:2] in ("D ", "I ", "O ", "X ") for s in row.sources)
        assert set(row.params) <= set(PARAMS) and row.behaviour
        for name, value in row.params.items():
            assert PARAMS[name].clean(value) == value  # a valid value of the parameter


def test_the_era_applies_only_to_the_agents_own_builtin_profiles():
    meta = {"version": "1.0.17"}
    for name in ("claude-code", "claude-code-recorded", "claude-code-thinking",
                 "claude-code-context-editing"):
        assert session_era(name, "claude-code", meta).version == "1.0.17"
    assert session_era("codex", "claude-code", meta) is None  # a what-if: current behaviour
    assert session_era("chatcli", "claude-code", meta) is None
    assert session_era("claude-code", "codex", {"cli_version": "0.40.0"}) is None
    # No version recorded: the current behaviour, said so.
    none = session_era("claude-code", "claude-code", {})
    assert none.rows == () and "version not recorded" in none.note
    # A legacy Codex rollout records no version but is older than 0.40.
    legacy = session_era("codex", "codex-legacy", {})
    assert legacy.params["codex_output_truncation"] == "rollout"
    assert "pre-0.40" in legacy.note


def test_the_note_names_the_release_and_what_it_did():
    note = session_era("claude-code", "claude-code", {"version": "1.0.17"}).note
    assert note.startswith("Claude Code 1.0.17: ")
    assert "Bash output middle-truncated at 30,000 characters" in note


def test_a_variants_own_value_and_an_explicit_value_win_over_the_era():
    era = era_for("claude-code", "1.0.17")
    recorded = resolve(PROFILES["claude-code-recorded"], era=era)
    assert recorded.values["cc_microcompact_trigger"] == "recorded"  # the profile's choice
    assert recorded.values["cc_bash_mode"] == "middle"  # the era's
    explicit = resolve("claude-code", {"cc_bash_mode": "persist"}, era=era)
    assert explicit.values["cc_bash_mode"] == "persist"


def test_a_saved_profile_takes_no_era():
    from ctxsim.pipeline.profiles import Profile

    saved = Profile("claude-code", "saved copy", PROFILES["claude-code"].stages, {})
    rc = resolve(saved)
    assert not rc.builtin
    assert rc.for_session("claude-code", {"version": "1.0.17"}) is rc


# --- each switch on a small transcript ----------------------------------------------------------

# The finding of issue 25: a 1.0.17 Bash result of 30,031 characters — the release's own cut
# (15,000 + marker + 15,000) — was persisted to a preview this release never made.
SHAPED_BASH = "a" * 15000 + "\n\n... [1 lines truncated] ...\n\n" + "b" * 15000


def test_a_bash_result_the_release_already_cut_is_left_as_it_is():
    assert len(SHAPED_BASH) == 30031
    old = _claude("1.0.17", *_one_result("Bash", SHAPED_BASH))
    assert _sent_result(old) == SHAPED_BASH
    # Without the era (no version recorded) the current release's rule persists it.
    assert _sent_result(_claude(None, *_one_result("Bash", SHAPED_BASH))).startswith(
        "<persisted-output>")
    # The era's mode alone would cut it again (the result is over the limit by its marker):
    # the idempotence is what keeps it.
    assert middle_truncate(SHAPED_BASH, 30000) != SHAPED_BASH
    # A lower limit than the release's is a what-if: the result is cut again.
    lower = _sent_result(old, claude_env={"BASH_MAX_OUTPUT_LENGTH": "20000"})
    assert len(lower) < 20100


def test_a_long_bash_result_is_middle_truncated_before_2_1_2_and_persisted_after():
    text = "line\n" * 8000  # 40,000 units, no marker
    old = _sent_result(_claude("2.0.28", *_one_result("Bash", text)))
    assert "lines truncated] ..." in old and not old.startswith("<persisted-output>")
    assert len(old) < 30100
    assert _sent_result(_claude("2.1.2", *_one_result("Bash", text))).startswith(
        "<persisted-output>")


@pytest.mark.parametrize(("version", "size", "persisted"), [
    ("1.0.17", 120000, False),  # nothing but Bash was saved to disk before 2.1.2
    ("2.1.14", 60000, False),  # 100,000 until 2.1.51
    ("2.1.14", 120000, True),
    ("2.1.60", 60000, True),  # 50,000 from 2.1.51
])
def test_the_persist_threshold_of_other_tools_follows_the_release(version, size, persisted):
    sent = _sent_result(_claude(version, *_one_result("Grep", "y" * size)))
    assert sent.startswith("<persisted-output>") is persisted


def test_an_oversized_mcp_result_is_an_error_before_2_1_2():
    env = {"claude_env": {"MAX_MCP_OUTPUT_TOKENS": "10"}}
    old = _claude("1.0.17", *_one_result("mcp__web__fetch", "x" * 100))
    assert _sent_result(old, **env).startswith('MCP tool "fetch" response (')
    new = _claude("2.1.60", *_one_result("mcp__web__fetch", "x" * 100))
    assert _sent_result(new, **env).endswith("[ctxsim: MCP output truncated at 10 tokens]")


def test_no_microcompact_before_2_1_63():
    def session(version):
        msgs = []
        for i in range(7):
            msgs += [assistant(f"c{i}", names={f"c{i}": "Read"}), tool(f"c{i}", f"file {i}")]
        msgs[0] = Message.of("assistant", "", tool_calls=msgs[0].tool_calls,
                             meta={"timestamp": "2026-03-01T10:00:00Z"})
        msgs[-2] = Message.of("assistant", "", tool_calls=msgs[-2].tool_calls,
                              meta={"timestamp": "2026-03-01T10:00:00Z"})
        late = Message.of("user", "continue", meta={"timestamp": "2026-03-01T12:00:00Z"})
        return _claude(version, user("go"), *msgs, late)

    def cleared(version):
        last = list(replay(session(version), "claude-code").calls())[-1]
        return sum(m.content == b"[Old tool result content cleared]" for m in last.sent)

    assert cleared("2.0.28") == 0
    assert cleared("2.1.63") == 2  # 7 results, the 5 most recent kept


def test_the_placeholder_summary_takes_the_releases_wording():
    def summary(version):
        msgs = (user("a" * 400), Message.of("assistant", "b" * 200), user("c" * 400))
        rep = replay(_claude(version, *msgs), "claude-code",
                     {"counter": "bytes4", "cc_context_window": 400, "cc_max_output_tokens": 100,
                      "cc_autocompact_buffer_tokens": 50, "summary_placeholder_tokens": 10})
        return list(rep.calls())[-1].sent[0].content.decode()

    assert "The conversation is summarized below:" in summary("2.0.28")  # v1
    assert "The summary below covers the earlier portion" in summary("2.1.69")  # v2


def test_a_codex_output_before_0_56_stays_as_the_rollout_recorded_it():
    mcp = "m" * 30000  # an MCP result: older Codex sent it whole
    msgs = (user("go"), assistant("call_1", names={"call_1": "web.fetch"}), tool("call_1", mcp),
            user("next"))
    assert _sent_result(_codex("0.40.0", *msgs)) == mcp
    assert _sent_result(_codex(None, *msgs, fmt="codex-legacy")) == mcp
    cut = _sent_result(_codex("0.58.0", *msgs))
    assert "chars truncated" in cut and len(cut.encode()) < 12100


def test_a_codex_output_this_release_already_cut_is_left_as_it_is():
    budget = {"mode": "bytes", "limit": 12000}
    shaped = truncate(("0123456789" * 3000).encode(), budget)
    assert truncate(shaped, budget) != shaped  # cutting again would cut the marker out
    msgs = (user("go"), assistant("call_1", names={"call_1": "shell"}),
            tool("call_1", shaped), user("next"))
    assert _sent_result(_codex("0.58.0", *msgs)).encode() == shaped


def test_the_configured_compaction_limit_replaces_the_default_before_0_100():
    config = {"codex_config": {"model_context_window": 1000,
                               "model_auto_compact_token_limit": 2000}}
    msgs = (user("x" * 3400), Message.of("assistant", "ok"), user("y" * 200))

    def compacted(version):
        rep = replay(_codex(version, *msgs), "codex", {"counter": "bytes4", **config})
        return any(r.report.get("compacted") for c in rep.calls() for r in c.stages
                   if r.stage == "codex_autocompact")

    assert not compacted("0.99.0")  # override: the limit is 2000, never reached
    assert compacted("0.100.0")  # min: 90 % of the window, 900


# --- the test of the table on real transcripts ------------------------------------------------

AGENT_FILES = (shared_files("transcripts/claude-code-jsonl", "*.jsonl")
               + shared_files("transcripts/codex-rollout", "*.jsonl")
               + shared_files("transcripts/codex-rollout-legacy", "*.jsonl"))


@requires_shared
@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.name[:40])
def test_shared_transcripts_are_sent_as_the_agent_sent_them(path):
    """On real transcripts that recorded no compaction, the session's own default profile
    changes nothing the real agent left intact: every call sends the recorded history."""
    for session in load_sessions(path):
        if session.meta.get("recorded_compactions"):
            continue
        rep = replay(session, default_profile_for(session.format))
        assert rep.config.era is not None
        for call in rep.calls():
            assert [m.content for m in call.sent] == [m.content for m in call.raw_history], (
                f"call {call.call_index} of {path.name} under {rep.config.era.label}")
            assert call.sent_tokens == call.raw_tokens


@requires_shared
def test_the_legacy_rollouts_mcp_outputs_were_sent_whole():
    """[O] for the Codex row: the pre-0.40 rollout records MCP outputs of up to 74 kB whole;
    the current release's cut (12,000 bytes) would have sent less at most calls."""
    (path,) = shared_files("transcripts/codex-rollout-legacy", "*.jsonl")
    session = load_sessions(path)[0]
    current = replay(session.messages, "codex", session=dict(session.meta))
    assert sum(c.sent_tokens < c.raw_tokens for c in current.calls()) > 200


def test_a_sweep_point_takes_the_sessions_era():
    from ctxsim.insights.prices import cache_rule
    from ctxsim.insights.sweep import SweepInput, evaluate

    session = _claude("1.0.17", *_one_result("Bash", SHAPED_BASH))

    def sent(fmt: str) -> int | None:
        source = SweepInput(session.messages, PROFILES["claude-code"],
                            transcript_format=fmt, meta=session.meta)
        return evaluate(source, {"cc_microcompact_keep_recent": 5}, cache_rule()).sent_tokens

    # The era leaves the release's own cut as it is; without it the result is persisted.
    assert sent("claude-code") > sent("")


def test_a_codex_release_that_cut_before_recording_says_so_when_nothing_was_cut():
    from ctxsim.pipeline.registry import STAGES, ReplayFacts

    era = era_for("codex", "0.40.0")
    values = resolve("codex", era=era).values
    note = STAGES["codex_tool_output"].quiet_note(ReplayFacts(({},), (0,), values, 74390))
    assert note.startswith("This Codex release cut tool outputs before the rollout recorded")
    assert "74,390 bytes" in note


@pytest.mark.parametrize(("version", "threshold"), [("2.0.76", 155_000), ("2.1.20", 155_000),
                                                     ("2.1.25", 167_000), ("1.0.17", 167_000)])
def test_claude_code_auto_compacts_where_its_release_did(version, threshold):
    """Public sessions' auto compact_boundary preTokens on a 200,000 window: 155,031–157,925
    from 2.0.76 to 2.1.20, 167,038 and up from 2.1.25 (before 2.0: not observed)."""
    from ctxsim.pipeline.agent_settings import claude_env_effective
    from ctxsim.pipeline.stages.claude_code_autocompact import threshold_of

    params = {"cc_autocompact_buffer_tokens": 13000, **era_for("claude-code", version).params}
    session = {"model": "claude-opus-4-5-20251101"}
    assert threshold_of(params, session, claude_env_effective({})).threshold == threshold


def test_a_bill_above_the_models_window_means_its_one_million_window():
    """claude-opus-4-6 sessions of 2.1.81 billed 210,000–220,000 tokens and never compacted:
    the `[1m]` window the model id does not show. An explicit window still wins."""
    from ctxsim.pipeline.agent_settings import claude_env_effective
    from ctxsim.pipeline.stages.claude_code_autocompact import threshold_of
    from ctxsim.pipeline.usage import session_totals

    env = claude_env_effective({})
    totals = session_totals([{"total_input": 150_000}, None, {"total_input": 210_000}])
    assert totals is not None and totals["peak_input"] == 210_000
    big = {"model": "claude-opus-4-6", "recorded_totals": totals}
    assert threshold_of({}, big, env).threshold == 1_000_000 - 20_000 - 13_000
    small = {"model": "claude-opus-4-6", "recorded_totals": {"peak_input": 150_000}}
    assert threshold_of({}, small, env).threshold == 167_000
    assert threshold_of({"cc_context_window": 200_000}, big, env).threshold == 167_000
