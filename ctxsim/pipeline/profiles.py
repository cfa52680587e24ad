"""Built-in profiles (SPEC §4): plain data — ordered (stage, phase) entries and parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .eras import Era, session_era
from .params import PARAMS, ParamError, ParamSpec, resolve_env, validate_params
from .registry import StageOrderError, check_stage_list, params_of


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    stages: tuple[tuple[str, str], ...]
    params: Mapping[str, Any] = field(default_factory=dict)
    # Parameters whose value here is ctxsim's choice ([X], SPEC-agents §2.5.9) → the vendor
    # that does not document it; the UI notes it as for `ParamSpec.undocumented_by`.
    undocumented: Mapping[str, str] = field(default_factory=dict)

    def default_note(self, name: str) -> str:
        """"ctxsim's default; not documented by …" for a parameter whose value under this
        profile is an [X] choice: the profile's own, else the parameter's default when the
        profile leaves it alone."""
        if name in self.undocumented:
            return f"ctxsim's default; not documented by {self.undocumented[name]}"
        return "" if name in self.params else PARAMS[name].default_note


CHATCLI_STAGES = (
    ("tool_cap", "dispatch"),
    ("microcompact", "persistent"),
    ("pairing", "persistent"),
    ("budget", "outgoing"),
)
AIVAX_STAGES = (("tool_context", "gateway"), ("context_limit", "gateway"))
CHATCLI_PARAMS = {"ccr": "on", "loop_mode": "agent", "spill_dir": "/tmp/chatcli-tool-results"}
AIVAX_PARAMS = {
    "contextMaximumSize": 32000,
    "contextOverflowAction": "Truncate",
    "toolContextCount": 3,
}

# SPEC-agents §2.5.9: the agents' own context management, and the Anthropic server edits.
CLAUDE_CODE_STAGES = (
    ("claude_code_tool_output", "dispatch"),
    ("claude_code_microcompact", "persistent"),
    ("claude_code_autocompact", "outgoing"),
)
CLAUDE_CODE_CONTEXT_EDITING = {
    "thinking_keep": "all",
    "trigger": {"type": "input_tokens", "value": 180000},
    "clear_at_least": {"type": "input_tokens", "value": 140000},
    "clear_tool_inputs": ["Bash", "PowerShell", "Glob", "Grep", "Read", "WebFetch", "WebSearch"],
}
AGENT_PROFILES = (
    Profile("claude-code", "Claude Code's own context management (SPEC-agents §2.5.1–2.5.3): "
            "tool output caps, microcompact, auto-compact at the threshold.", CLAUDE_CODE_STAGES,
            {}),
    Profile("claude-code-recorded", "Claude Code replaying what the transcript recorded: its "
            "microcompactions and compactions.", CLAUDE_CODE_STAGES,
            {"cc_microcompact_trigger": "recorded", "cc_autocompact_mode": "recorded"}),
    Profile("claude-code-thinking", "Claude Code, then the API's clear_thinking with keep "
            "\"all\" (ctxsim's assumption): thinking tokens become visible.",
            CLAUDE_CODE_STAGES + (("clear_thinking", "gateway"),), {"thinking_keep": "all"},
            {"thinking_keep": "Anthropic"}),
    Profile("claude-code-context-editing", "Claude Code, then API-side clearing of thinking "
            "and tool results (a what-if; ctxsim's values).",
            CLAUDE_CODE_STAGES + (("clear_thinking", "gateway"), ("clear_tool_uses", "gateway")),
            CLAUDE_CODE_CONTEXT_EDITING, dict.fromkeys(CLAUDE_CODE_CONTEXT_EDITING, "Anthropic")),
    Profile("anthropic-compact", "Anthropic server-side compaction, compact_20260112 "
            "(SPEC-agents §2.5.8).", (("anthropic_compact", "gateway"),), {}),
    Profile("anthropic-context-management", "Anthropic compaction, clear_thinking and "
            "clear_tool_uses together, server-side.",
            (("anthropic_compact", "gateway"), ("clear_thinking", "gateway"),
             ("clear_tool_uses", "gateway")), {}),
)
CODEX_STAGES = (("codex_tool_output", "dispatch"), ("codex_autocompact", "outgoing"))
OPENHANDS_STAGES = (("openhands_condenser", "outgoing"),)
# The OpenHands server's default pipeline when `enable_default_condenser` is on
# (server/session/session.py; max_size = condenser_max_size or 120).
OPENHANDS_APP_CONDENSER = {"type": "pipeline", "condensers": [
    {"type": "conversation_window"},
    {"type": "browser_output_masking", "attention_window": 2},
    {"type": "llm", "llm_config": "condenser", "keep_first": 4, "max_size": 120},
]}
# Codex runs OpenAI's models (gpt-5-codex, gpt-5, o3, o4-mini, gpt-4.1, codex-mini), whose
# tokenizer is o200k_base: its profiles count with it (issue 26).
CODEX_COUNTER = {"counter": "o200k_base"}
CODEX_OPENHANDS_PROFILES = (
    Profile("codex", "Codex CLI: tool outputs truncated to the model's policy × 1.2, "
            "auto-compaction at 90 % of the window (SPEC-agents §2.5.4–2.5.5).", CODEX_STAGES,
            CODEX_COUNTER),
    Profile("codex-recorded", "Codex CLI, replaying the rollout's own compactions.",
            CODEX_STAGES, {**CODEX_COUNTER, "codex_autocompact_mode": "recorded"}),
    Profile("openhands", "OpenHands agent default: conversation_window condenser on "
            "context-window errors (a 200K window stands in) (SPEC-agents §2.5.6).",
            OPENHANDS_STAGES, {"openhands_condenser_config": {"type": "conversation_window"},
                               "openhands_request_over_tokens": 200000}),
    Profile("openhands-app", "OpenHands server default pipeline (conversation window, "
            "browser masking, LLM summary at 120 events).", OPENHANDS_STAGES,
            {"openhands_condenser_config": OPENHANDS_APP_CONDENSER,
             "openhands_request_over_tokens": 200000}),
)

# SPEC-agents-2: each agent's own context management, the default profile of its formats.
AGENT_PROFILES_2 = (
    Profile("gemini-cli", "Gemini CLI: tool output truncation, output masking, chat "
            "compression at 50 % of the token limit (SPEC-agents-2 §1); older releases by "
            "their version.", (("gemini_tool_output", "dispatch"), ("gemini_mask", "persistent"),
                                ("gemini_compress", "outgoing")), {}),
    Profile("openhands-v1", "OpenHands V1 (software-agent-sdk): terminal outputs cut at "
            "30,000 characters, LLMSummarizingCondenser with the app's settings (max_size 240, "
            "keep_first 2, the model's input limit) (SPEC-agents-2 §2).",
            (("openhands_v1_tool_output", "dispatch"), ("openhands_v1_condenser", "outgoing")),
            {}),
    Profile("cline", "Cline 3.x classic truncation past maxAllowedSize (SPEC-agents-2 §3).",
            (("cline_truncation", "outgoing"),), {}),
    Profile("roo-code", "Roo Code: condense at 100 % or past window × 0.9 − max output, else "
            "the sliding window (SPEC-agents-2 §4).", (("roo_condense", "outgoing"),), {}),
    Profile("aider", "Aider: the chat history summarised past max_chat_history_tokens "
            "(SPEC-agents-2 §5).", (("aider_summarize", "outgoing"),), {}),
    Profile("opencode", "OpenCode: old tool outputs pruned, auto-compaction near the limit "
            "(SPEC-agents-2 §6).", (("opencode_prune", "persistent"),
                                    ("opencode_compact", "outgoing")), {}),
    Profile("mini-swe-agent", "mini-swe-agent: no history management, long outputs shortened "
            "by its observation template (SPEC-agents-2 §8).",
            (("mini_swe_output", "dispatch"),), {}),
)

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile("chatcli", "ChatCLI 1.188.0 as implemented (SPEC §2.1).", CHATCLI_STAGES,
                CHATCLI_PARAMS),
        Profile(
            "chatcli-docs",
            "ChatCLI as its documentation describes it (SPEC §2.2).",
            (("tool_cap", "dispatch"), ("pairing", "persistent"), ("budget", "outgoing"),
             ("microcompact", "outgoing")),
            {**CHATCLI_PARAMS, "semantics": "documented"},
        ),
        Profile("aivax", "AIVAX gateway, the documented example (SPEC §2.3).", AIVAX_STAGES,
                AIVAX_PARAMS),
        Profile("anthropic-clear-tool-uses", "Anthropic context editing, clear_tool_uses "
                "(SPEC §2.4).", (("clear_tool_uses", "gateway"),), {}),
        Profile("chatcli-aivax", "ChatCLI, then the AIVAX gateway on what it sent.",
                CHATCLI_STAGES + AIVAX_STAGES, {**CHATCLI_PARAMS, **AIVAX_PARAMS}),
        Profile("none", "No management: the raw context, for comparison.", (), {}),
        *AGENT_PROFILES,
        *CODEX_OPENHANDS_PROFILES,
        *AGENT_PROFILES_2,
    )
}
DEFAULT_PROFILE = "chatcli"
# SPEC §4: a session opens with its own agent's profile when ctxsim has one (SPEC-agents
# §2.5.9); the formats of the importers name the agent.
AGENT_DEFAULT_PROFILES = {"claude-code": "claude-code", "codex": "codex", "codex-legacy": "codex",
                          "openhands": "openhands", "openhands-eval": "openhands",
                          # SPEC-agents-2: the formats' names as their importers give them.
                          "gemini-cli": "gemini-cli", "gemini-cli-jsonl": "gemini-cli",
                          "openhands-v1": "openhands-v1", "openhands-v1-eval": "openhands-v1",
                          "codex-exec": "codex", "mini-swe-agent": "mini-swe-agent",
                          "cline": "cline", "roo-code": "roo-code", "aider": "aider",
                          "opencode": "opencode"}


def default_profile_for(transcript_format: str) -> str:
    """The profile a session of this format opens with: its agent's, else `chatcli`."""
    name = AGENT_DEFAULT_PROFILES.get(transcript_format)
    return name if name in PROFILES else DEFAULT_PROFILE


@dataclass(frozen=True)
class RunConfig:
    """A profile resolved for one replay: stage list, every parameter's value, env effects."""

    profile: str
    stages: tuple[tuple[str, str], ...]
    values: Mapping[str, Any]
    warnings: tuple[str, ...] = ()
    # The explicit values (validated), the agent release whose values fill in (eras.py), and
    # whether `profile` names a built-in profile (which an era may apply to).
    config: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    era: Era | None = None
    builtin: bool = False

    def effective_config(self) -> dict[str, Any]:
        """The trace's `effective_config`: ChatCLI's effective knobs when a ChatCLI stage runs,
        then the value of every parameter the profile's stages read."""
        from .registry import STAGES, params_of

        v = self.values
        out: dict[str, Any] = {"profile": self.profile, "stages": [list(e) for e in self.stages]}
        if any(STAGES[s].family == "chatcli" for s, _ in self.stages):
            out.update(loop_mode=v["loop_mode"], ccr=v["ccr"], spill_dir=v["spill_dir"])
            out.update(v["_env_effective"])
            out.update(preview_head_chars=4000, preview_tail_chars=1000, default_tool_cap=30000)
        for name in sorted(params_of(self.stages)):
            if name not in out:
                value = v.get(name)
                out[name] = list(value) if isinstance(value, tuple) else value
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.era is not None:
            out["era"] = self.era.note
        return out

    def for_session(self, transcript_format: str, meta: Mapping[str, Any] | None) -> RunConfig:
        """These settings for one session: a built-in agent profile replaying its own agent's
        transcript takes the era of the release that wrote it (SPEC-agents §2.5.0.11), under
        the explicit values; anything else is returned as it is."""
        era = session_era(self.profile, transcript_format, meta, self.config) \
            if self.builtin else None
        if era == self.era:
            return self
        profile = PROFILES[self.profile]
        stages = None if self.stages == profile.stages else self.stages
        return resolve(profile, self.config, stages, era=era)


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ParamError(
            {"profile": f"unknown profile {name!r} (known: {', '.join(PROFILES)})"}
        ) from None


def resolve(
    profile: str | Profile = DEFAULT_PROFILE,
    config: Mapping[str, Any] | None = None,
    stages: Any = None,
    era: Era | None = None,
) -> RunConfig:
    """Profile values, overridden by `config`, over the `era`'s values (the release that wrote
    the transcript, `eras.py`), over every parameter's default.

    Invariant: unknown keys and bad values raise ParamError with a message per field; a known
    parameter the stages do not read is validated, then listed in `warnings`; a custom
    stage list that breaks the phase order raises ParamError on `stages`.
    """
    prof = get_profile(profile) if isinstance(profile, str) else profile
    try:
        entries = check_stage_list(stages) if stages is not None else prof.stages
    except StageOrderError as exc:
        raise ParamError({"stages": str(exc)}) from None
    allowed = params_of(entries) | set(prof.params)
    config = dict(config or {})
    errors: dict[str, str] = {}
    notes: list[str] = []
    for key in config:
        if key not in PARAMS:
            errors[key] = "unknown parameter"
        elif key not in allowed:
            # Still validated, but only noted: one scenario can be replayed under any profile.
            notes.append(f"{key} is ignored: not a parameter of the stages of {prof.name}")
    try:
        cleaned = validate_params({k: v for k, v in config.items() if k not in errors})
    except ParamError as exc:
        errors.update(exc.errors)
        cleaned = {}
    if errors:
        raise ParamError(errors)
    values: dict[str, Any] = {name: spec.default for name, spec in PARAMS.items()}
    if era is not None:
        values.update(validate_params(dict(era.params)))
        values["_era"] = (era.agent, era.version)  # the release these values hold
    values.update(validate_params(dict(prof.params)))
    values.update(cleaned)
    env = resolve_env(values["env"])
    values["_env_effective"] = MappingProxyType({
        _env_key(name): setting.effective for name, setting in env.items()
    })
    warnings = tuple(notes) + tuple(s.warning for s in env.values() if s.warning)
    if values.get("claude_env"):
        from .agent_settings import claude_env_effective

        warnings += claude_env_effective(values["claude_env"]).warnings
    return RunConfig(prof.name, tuple(entries), MappingProxyType(values), warnings,
                     MappingProxyType(cleaned), era, PROFILES.get(prof.name) is prof)


def _env_key(name: str) -> str:
    from .params import ENV_BY_NAME

    return ENV_BY_NAME[name].key


def param_specs(stages: tuple[tuple[str, str], ...]) -> list[ParamSpec]:
    """The specs a thresholds form shows for a stage list: engine parameters first, then each
    stage's own in stage order (a parameter shared by stages appears once)."""
    from .registry import ENGINE_PARAMS, STAGES

    names: list[str] = list(ENGINE_PARAMS)
    for stage, _ in stages:
        names += [n for n in STAGES[stage].params if n not in names]
    return [PARAMS[n] for n in names]
