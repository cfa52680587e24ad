"""Typed, validated parameters of the pipeline stages (SPEC §2, §4, §6).

Every parameter is declared once as a `ParamSpec`: its config key (SPEC §6's name), label, unit,
default, help text and, for ChatCLI's knobs, the environment variable. The web UI generates its
thresholds form from these specs, so they carry everything a form needs. Validation returns a
message per field instead of raising on the first problem, so a form can show them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


class ParamError(ValueError):
    """Bad parameter values: `errors` maps each field (config key or path) to its message."""

    def __init__(self, errors: Mapping[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def go_atoi(text: str) -> int | None:
    """Parse like Go's `strconv.Atoi`: optional sign, ASCII digits only, must fit int64.

    Returns None where Go returns an error (empty, spaces, underscores, `2e5`, overflow).
    """
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body or not all("0" <= c <= "9" for c in body):
        return None
    value = int(text)
    if value > INT64_MAX or value < INT64_MIN:
        return None
    return value


@dataclass(frozen=True)
class EnvVar:
    """One ChatCLI environment variable: where its effective value goes and its default."""

    name: str
    key: str  # the effective-config key it sets (trace `effective_config`)
    default: int
    label: str
    help: str
    unit: str  # what the form says it counts


# ChatCLI's knobs (behaviour file §3.6, §4.8). Values > 0 parsed by Atoi win; anything else
# silently keeps the default, exactly as ChatCLI does.
CHATCLI_ENV: tuple[EnvVar, ...] = (
    EnvVar("CHATCLI_TOOL_RESULT_BUDGET_CHARS", "turn_budget_chars", 200000,
           "Per-group budget", "Pass 2: an assistant group over this many bytes is cut, "
           "largest results first.", "bytes"),
    EnvVar("CHATCLI_TOOL_RESULT_MAX_CHARS", "per_result_max_chars", 20000,
           "Per-result limit", "Pass 1: a result strictly over this size is spilled to a file "
           "and replaced by a 4000/1000 preview.", "bytes"),
    EnvVar("CHATCLI_MICROCOMPACT_TRUNCATE_TURNS", "mc_turns_before_truncate", 2,
           "Truncate at age", "Results this many assistant turns old get a head/tail preview; "
           "microcompact also skips loop turns below it.", "assistant turns"),
    EnvVar("CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS", "mc_turns_before_summarize", 4,
           "Summarize at age", "Results this many assistant turns old become a one-line summary.",
           "assistant turns"),
    EnvVar("CHATCLI_MICROCOMPACT_HEAD_CHARS", "mc_truncate_head_chars", 2000,
           "Preview head", "Bytes kept at the start of a microcompact preview.", "bytes"),
    EnvVar("CHATCLI_MICROCOMPACT_TAIL_CHARS", "mc_truncate_tail_chars", 500,
           "Preview tail", "Bytes kept at the end of a microcompact preview.", "bytes"),
    EnvVar("CHATCLI_MICROCOMPACT_MIN_CONTENT", "mc_min_content_size", 3000,
           "Minimum size", "Results smaller than this are never microcompacted.", "bytes"),
)
ENV_BY_NAME = {v.name: v for v in CHATCLI_ENV}
ENV_BY_KEY = {v.key: v for v in CHATCLI_ENV}


def env_default(key: str) -> int:
    """ChatCLI's default for an effective-config key (e.g. `mc_min_content_size`)."""
    return ENV_BY_KEY[key].default


@dataclass(frozen=True)
class EnvSetting:
    """What was typed for one env var, what ChatCLI makes of it, and why."""

    name: str
    typed: str | None
    effective: int
    warning: str = ""


def resolve_env(env: Mapping[str, str]) -> dict[str, EnvSetting]:
    """Effective value of every ChatCLI variable; an ignored value carries a warning.

    Invariant: the effective value is the Atoi result when it is > 0, else the default
    (ChatCLI never rejects a value, it only ignores it).
    """
    out: dict[str, EnvSetting] = {}
    for var in CHATCLI_ENV:
        typed = env.get(var.name)
        if typed is None:
            out[var.name] = EnvSetting(var.name, None, var.default)
            continue
        parsed = go_atoi(typed)
        if parsed is not None and parsed > 0:
            out[var.name] = EnvSetting(var.name, typed, parsed)
        else:
            why = "not an integer" if parsed is None else "not greater than 0"
            out[var.name] = EnvSetting(
                var.name, typed, var.default,
                f"{var.name}={typed!r} is ignored by ChatCLI ({why}); {var.default} is used",
            )
    return out


# Where one field holds one ChatCLI variable (a URL or form field, a sweep axis) it is named
# `env.NAME`; these two are the only places that spell the prefix out.
ENV_PREFIX = "env."


def env_field(var: str) -> str:
    """The field name of ChatCLI variable `var`."""
    return ENV_PREFIX + var


def env_var_of(field_name: str) -> str | None:
    """The ChatCLI variable a field names, or None when it names something else."""
    return field_name[len(ENV_PREFIX):] if field_name.startswith(ENV_PREFIX) else None


# --- validators ---------------------------------------------------------------------------

Validator = Callable[[Any], Any]  # returns the normalised value or raises ValueError(message)


def _int_ge0(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("expected an integer")
    if v < 0:
        raise ValueError("must be 0 or more")
    return v


def _opt_int_ge0(v: Any) -> int | None:
    return None if v is None else _int_ge0(v)


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError("expected a string")
    return v


def _opt_string(v: Any) -> str | None:
    return None if v is None else _string(v)


def _string_list(v: Any) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
        raise ValueError("expected a list of strings")
    return tuple(v)


def _choice(*options: str) -> Validator:
    def check(v: Any) -> str:
        if v not in options:
            raise ValueError("expected one of " + ", ".join(repr(o) for o in options))
        return v

    return check


def _env(v: Any) -> dict[str, str]:
    if not isinstance(v, Mapping):
        raise ValueError("expected an object of strings")
    for k, x in v.items():
        if not isinstance(x, str):
            raise ValueError(f"{k}: expected a string (ChatCLI reads environment text)")
    return dict(v)


def _tool_caps(v: Any) -> dict[str, str]:
    if not isinstance(v, Mapping) or not all(
        isinstance(k, str) and isinstance(x, str) for k, x in v.items()
    ):
        raise ValueError("expected an object mapping tool names to plugin names")
    return dict(v)


def _typed_value(allowed_types: tuple[str, ...]) -> Validator:
    def check(v: Any) -> dict[str, Any]:
        if not isinstance(v, Mapping) or set(v) != {"type", "value"}:
            raise ValueError('expected {"type": ..., "value": N}')
        if v["type"] not in allowed_types:
            raise ValueError("type must be one of " + ", ".join(allowed_types))
        _int_ge0(v["value"])
        return {"type": v["type"], "value": v["value"]}

    return check


def _opt_typed_value(allowed: tuple[str, ...]) -> Validator:
    inner = _typed_value(allowed)
    return lambda v: None if v is None else inner(v)


def _bool_or_list(v: Any) -> bool | tuple[str, ...]:
    if isinstance(v, bool):
        return v
    try:
        return _string_list(v)
    except ValueError:
        raise ValueError("expected true, false or a list of tool names") from None


@dataclass(frozen=True)
class ParamSpec:
    """One parameter as the UI, the scenario config and validation see it."""

    name: str
    label: str
    default: Any
    help: str
    validate: Validator = field(repr=False)
    unit: str = ""
    # How the value is shaped, which decides how a form edits it and a URL carries it:
    # int | optional-int | string | choice | list | map | env | object ({"type", "value"};
    # `choices` are its types; a None default means "none" is one) | bool_or_list (true,
    # false or a list of names); for SPEC-agents also bool, number and limits
    # (tool name → integer or null).
    kind: str = "int"
    choices: tuple[str, ...] = ()
    env_vars: tuple[EnvVar, ...] = ()

    def clean(self, value: Any) -> Any:
        return self.validate(value)


AIVAX_PLACEHOLDER_EN = "[tool response truncated - call this tool again]"
AIVAX_PLACEHOLDER_PT = "[resposta da ferramenta truncada - chame esta ferramenta novamente]"
DEFAULT_EXEMPT_TOOLS = ("write", "edit", "patch", "exec", "run", "bash", "shell")
COUNTERS = ("cl100k_base", "o200k_base", "bytes4")
IMAGE_RULES = ("auto", "anthropic", "openai", "bytes4")  # see images.IMAGE_RULES

# In the order the thresholds form shows them.
PARAMS: dict[str, ParamSpec] = {
    p.name: p
    for p in (
        ParamSpec("counter", "Token counter", "cl100k_base", "How tokens are estimated.",
                  _choice(*COUNTERS), kind="choice", choices=COUNTERS),
        ParamSpec("image_rule", "Image rule", "auto", "How images are counted: the provider's "
                  "rule from the image's size (auto: the session's provider), or base64/4 "
                  "(bytes4, AIVAX's estimate). The AIVAX stages always use bytes4.",
                  _choice(*IMAGE_RULES), kind="choice", choices=IMAGE_RULES),
        ParamSpec("env", "ChatCLI environment", {}, "CHATCLI_* variables as typed; each is read "
                  "like Go strconv.Atoi and used only when > 0.", _env, kind="env",
                  env_vars=CHATCLI_ENV),
        ParamSpec("loop_mode", "Loop mode", "agent", "agent: a text-only answer ends the run "
                  "(loop turn back to 0); coder: the loop turn keeps counting.",
                  _choice("agent", "coder"), kind="choice", choices=("agent", "coder")),
        ParamSpec("ccr", "Recall suffix (CCR)", "on", "on: microcompact stubs end with an "
                  "@recall marker (ChatCLI's default); off = CHATCLI_COMPRESSION=off.",
                  _choice("on", "off"), kind="choice", choices=("on", "off")),
        ParamSpec("tool_caps", "Tool → plugin", {}, "Maps a transcript's tool names to the "
                  "ChatCLI plugin they dispatch as (e.g. Read → @read for the 80000 cap).",
                  _tool_caps, kind="map"),
        ParamSpec("exempt_tools", "Exempt tools", DEFAULT_EXEMPT_TOOLS, "chatcli-docs only: "
                  "results of tools whose name contains one of these (any case) are never "
                  "microcompacted.", _string_list, kind="list"),
        ParamSpec("semantics", "Semantics", "implemented", "implemented: ChatCLI's code; "
                  "documented: what its documentation describes.",
                  _choice("implemented", "documented"), kind="choice",
                  choices=("implemented", "documented")),
        ParamSpec("spill_dir", "Spill directory", "/tmp/chatcli-tool-results", "Directory "
                  "named in budget previews; spill files go there.", _string, kind="string"),
        ParamSpec("anchor_text", "Anchor text", None, "Optional system message appended to "
                  "every outgoing copy (ChatCLI's per-turn reminder).", _opt_string,
                  kind="string"),
        ParamSpec("toolContextCount", "Tool context count", 0, "The N most recent tool "
                  "messages keep their content; older ones get the placeholder. 0 = off.",
                  _int_ge0, unit="messages"),
        ParamSpec("toolContextPlaceholder", "Tool placeholder", AIVAX_PLACEHOLDER_EN,
                  "Text replacing older tool results.", _string, kind="string",
                  choices=(AIVAX_PLACEHOLDER_EN, AIVAX_PLACEHOLDER_PT)),
        ParamSpec("contextMaximumSize", "Context maximum size", None, "Limit of the prompt "
                  "estimate; empty = no limit.", _opt_int_ge0, unit="tokens",
                  kind="optional-int"),
        ParamSpec("contextOverflowAction", "Overflow action", "Throw", "Throw fails the call; "
                  "Truncate removes the oldest messages; TruncateHard also fails if still over.",
                  _choice("Throw", "Truncate", "TruncateHard"), kind="choice",
                  choices=("Throw", "Truncate", "TruncateHard")),
        ParamSpec("systemInstructions", "Gateway system instructions", "", "The gateway's own "
                  "instructions, counted in the full prompt.", _string, kind="string"),
        ParamSpec("trigger", "Trigger", {"type": "input_tokens", "value": 100000},
                  "Clearing applies when the prompt is over this many input tokens, or the "
                  "history holds more than this many tool uses.",
                  _typed_value(("input_tokens", "tool_uses")), kind="object",
                  choices=("input_tokens", "tool_uses")),
        ParamSpec("keep", "Keep", {"type": "tool_uses", "value": 3}, "The most recent tool "
                  "uses whose results are kept.", _typed_value(("tool_uses",)), kind="object",
                  choices=("tool_uses",), unit="tool uses"),
        ParamSpec("clear_at_least", "Clear at least", None, "Clear nothing unless this many "
                  "input tokens are saved.", _opt_typed_value(("input_tokens",)),
                  kind="object", choices=("input_tokens",), unit="tokens"),
        ParamSpec("exclude_tools", "Exclude tools", (), "Tools whose results are never "
                  "cleared.", _string_list, kind="list"),
        ParamSpec("clear_tool_inputs", "Clear tool inputs", False, "Also replace the cleared "
                  "calls' arguments by {} (true, or only for these tools).", _bool_or_list,
                  kind="bool_or_list"),
        ParamSpec("placeholder", "Placeholder", "[cleared]", "Text replacing a cleared result.",
                  _string, kind="string"),
    )
}


# --- SPEC-agents §2.5: Claude Code, Anthropic server edits, and the shared maps -------------

X_NOTE = " ctxsim's default; not documented by Anthropic."


def _int_range(lo: int, hi: int) -> Validator:
    def check(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("expected an integer")
        if not lo <= v <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return v

    return check


def _opt_int_range(lo: int, hi: int) -> Validator:
    inner = _int_range(lo, hi)
    return lambda v: None if v is None else inner(v)


def _number(lo: float, hi: float, low_open: bool = False) -> Validator:
    def check(v: Any) -> float | int:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            raise ValueError("expected a number")
        if v > hi or v < lo or (low_open and v == lo):
            raise ValueError(f"must be {'above' if low_open else 'at least'} {lo} and at most {hi}")
        return v

    return check


def _boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("expected true or false")
    return v


def _names(v: Any) -> tuple[str, ...]:
    names = _string_list(v)
    if not names or not all(names):
        raise ValueError("expected a non-empty list of tool names")
    return names


def _persist_overrides(v: Any) -> dict[str, int | None]:
    if not isinstance(v, Mapping):
        raise ValueError("expected an object mapping tool names to an integer or null")
    out: dict[str, int | None] = {}
    for k, x in v.items():
        if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 1):
            raise ValueError(f"{k}: expected an integer of at least 1, or null (never persist)")
        out[k] = x
    return out


def _thinking_keep(v: Any) -> Any:
    if v == "all":
        return "all"
    if (not isinstance(v, Mapping) or set(v) != {"type", "value"}
            or v["type"] != "thinking_turns"):
        raise ValueError('expected "all" or {"type": "thinking_turns", "value": N}')
    n = v["value"]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100000:
        raise ValueError("value must be an integer between 1 and 100000")
    return {"type": "thinking_turns", "value": n}


def _compact_trigger(v: Any) -> dict[str, Any]:
    if (not isinstance(v, Mapping) or set(v) != {"type", "value"}
            or v["type"] != "input_tokens"):
        raise ValueError('expected {"type": "input_tokens", "value": N}')
    n = v["value"]
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError("value must be an integer")
    if n < 50000:
        raise ValueError("compact_trigger.value must be at least 50000 (the API rejects "
                         "smaller triggers)")
    if n > 10_000_000:
        raise ValueError("value must be at most 10000000")
    return {"type": "input_tokens", "value": n}


def _claude_env(v: Any) -> dict[str, str]:
    from .agents_common import clean_claude_env

    return clean_claude_env(v)


def _codex_config(v: Any) -> dict[str, Any]:
    from .agents_common import clean_codex_config

    return clean_codex_config(v)


CC_MICROCOMPACT_TOOLS = ("Read", "Bash", "PowerShell", "Grep", "Glob", "WebSearch", "WebFetch",
                         "Edit", "Write")
CC_TOOL_RESULTS_DIR = "~/.claude/projects/{project}/{session_id}/tool-results"

PARAMS.update({
    p.name: p
    for p in (
        ParamSpec("claude_env", "Claude Code env", {}, "Keys of the env block of Claude Code's "
                  "settings.json, as typed; each is read the way a JavaScript program usually "
                  "reads it (parse rules are ctxsim's; not documented by Anthropic).",
                  _claude_env, kind="map"),
        ParamSpec("codex_config", "Codex config", {}, "Top-level keys of ~/.codex/config.toml: "
                  "model, tool_output_token_limit, model_context_window, "
                  "model_auto_compact_token_limit.", _codex_config, kind="map"),
        ParamSpec("summary_placeholder_tokens", "Placeholder summary size", 2000, "Size of the "
                  "summary ctxsim inserts when a compaction has no recorded summary. ctxsim's "
                  "default; no tool documents a typical summary size.", _int_range(0, 200000),
                  unit="tokens"),
        # claude_code_tool_output (§2.5.1)
        ParamSpec("cc_bash_mode", "Bash over the cap", "persist", "persist: saved to a file, "
                  "the model gets a preview (current versions); middle: head and tail kept "
                  "(2025 versions).", _choice("persist", "middle"), kind="choice",
                  choices=("persist", "middle")),
        ParamSpec("cc_bash_tools", "Shell tools", ("Bash", "PowerShell"), "Tools "
                  "BASH_MAX_OUTPUT_LENGTH applies to." + X_NOTE, _names, kind="list"),
        ParamSpec("cc_bash_persist_trim", "Trim persisted Bash output", True, "Leading blank "
                  "lines and trailing white space stay out of the preview." + X_NOTE,
                  _boolean, kind="bool", choices=("true", "false")),
        ParamSpec("cc_mcp_mode", "MCP over the cap", "truncate", "truncate (current versions) "
                  "or error (2025 versions).", _choice("truncate", "error"), kind="choice",
                  choices=("truncate", "error")),
        ParamSpec("cc_mcp_truncation_notice", "MCP truncation notice",
                  "\n\n[ctxsim: MCP output truncated at {max} tokens]", "Text appended to a "
                  "truncated MCP result; {max} is the limit. ctxsim's text; not documented by "
                  "Anthropic.", _string, kind="string"),
        ParamSpec("cc_mcp_precheck_factor", "MCP rough pre-check", 0, "0: count every MCP "
                  "result; f > 0: leave alone a result whose rough estimate is at most f × the "
                  "limit." + X_NOTE, _number(0, 1), kind="number"),
        ParamSpec("cc_persist_threshold_chars", "Persist threshold", 50000, "Results longer "
                  "than this (UTF-16 units) are saved to a file and previewed.",
                  _int_range(1, 10_000_000), unit="chars"),
        ParamSpec("cc_persist_overrides", "Per-tool persist thresholds", {"Read": None},
                  "Tool name → threshold, or null to never persist (Read by default)." + X_NOTE,
                  _persist_overrides, kind="limits"),
        ParamSpec("cc_tool_results_dir", "Tool results folder", CC_TOOL_RESULTS_DIR, "Where "
                  "persisted results are saved; {project} and {session_id} are substituted.",
                  _string, kind="string"),
        ParamSpec("cc_preview_cut", "Preview cut", "newline", "newline: the 2000-unit preview "
                  "ends at its last line break past unit 1000; exact: always at 2000." + X_NOTE,
                  _choice("newline", "exact"), kind="choice", choices=("newline", "exact")),
        ParamSpec("cc_read_cap", "Read token cap", False, "Apply "
                  "CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS to recorded Read results (off: they "
                  "are already capped).", _boolean, kind="bool", choices=("true", "false")),
        # claude_code_microcompact (§2.5.2)
        ParamSpec("cc_microcompact_trigger", "Microcompact trigger", "time", "time: after an "
                  "idle gap; count: over a number of results; recorded: the transcript's "
                  "markers; off." + X_NOTE, _choice("time", "count", "recorded", "off"),
                  kind="choice", choices=("time", "count", "recorded", "off")),
        ParamSpec("cc_microcompact_gap_minutes", "Idle gap", 60, "Minutes since the last "
                  "assistant message that make old results be cleared." + X_NOTE,
                  _number(0, 10080, low_open=True), unit="minutes", kind="number"),
        ParamSpec("cc_microcompact_keep_recent", "Keep recent results", 5, "The most recent "
                  "results kept (at least 1).", _int_range(0, 10000), unit="results"),
        ParamSpec("cc_microcompact_count_trigger", "Count trigger", 12, "count trigger: fires "
                  "when more results than this are uncleared." + X_NOTE,
                  _int_range(1, 100000), unit="results"),
        ParamSpec("cc_microcompact_tools", "Cleared tools", CC_MICROCOMPACT_TOOLS, "Tools whose "
                  "old results are cleared." + X_NOTE, _string_list, kind="list"),
        ParamSpec("cc_microcompact_placeholder", "Cleared placeholder",
                  "[Old tool result content cleared]", "Text of a cleared result.", _string,
                  kind="string"),
        # claude_code_autocompact (§2.5.3)
        ParamSpec("cc_model", "Model", None, "Model id for the window table; empty: the "
                  "session's model.", _opt_string, kind="string"),
        ParamSpec("cc_context_window", "Context window", None, "Empty: from the model table.",
                  _opt_int_range(1, 10_000_000), unit="tokens", kind="optional-int"),
        ParamSpec("cc_max_output_tokens", "Max output", None, "Empty: from the model table.",
                  _opt_int_range(1, 1_000_000), unit="tokens", kind="optional-int"),
        ParamSpec("cc_autocompact_buffer_tokens", "Safety buffer", 13000, "Tokens below the "
                  "effective window where auto-compaction fires (users' reading of the CLI).",
                  _int_range(0, 1_000_000), unit="tokens"),
        ParamSpec("cc_summary_reserve_tokens", "Summary reserve", 20000, "Part of the window "
                  "kept free for the summary, at most the model's output limit." + X_NOTE,
                  _int_range(0, 1_000_000), unit="tokens"),
        ParamSpec("cc_autocompact_mode", "Auto-compact mode", "predict", "predict: fire at the "
                  "threshold; recorded: replay the transcript's compactions." + X_NOTE,
                  _choice("predict", "recorded"), kind="choice",
                  choices=("predict", "recorded")),
        ParamSpec("cc_token_source", "Token source", "counter", "counter: the profile's counter "
                  "on the full prompt; usage: the last recorded usage plus a rough estimate of "
                  "what followed." + X_NOTE, _choice("counter", "usage"), kind="choice",
                  choices=("counter", "usage")),
        ParamSpec("cc_summary_template", "Summary wording", "v2", "v2: 2026 transcripts; v1: "
                  "2025 transcripts.", _choice("v2", "v1"), kind="choice", choices=("v2", "v1")),
        # clear_thinking (§2.5.7)
        ParamSpec("thinking_keep", "Keep thinking", {"type": "thinking_turns", "value": 1},
                  'Thinking of the N most recent thinking turns is kept, or "all".',
                  _thinking_keep, kind="object", choices=("thinking_turns", "all"),
                  unit="thinking turns"),
        # anthropic_compact (§2.5.8)
        ParamSpec("compact_trigger", "Compaction trigger", {"type": "input_tokens",
                                                           "value": 150000},
                  "The server compacts when the input is over this many tokens (at least "
                  "50000).", _compact_trigger, kind="object", choices=("input_tokens",),
                  unit="tokens"),
        ParamSpec("compact_instructions", "Summary instructions", None, "Replaces the default "
                  "summarization prompt (exported only: no model runs).", _opt_string,
                  kind="string"),
        ParamSpec("compact_pause_after_compaction", "Pause after compaction", False, "Return "
                  "the compaction block to the client (exported only).", _boolean,
                  kind="bool", choices=("true", "false")),
        ParamSpec("anthropic_compact_mode", "Compaction mode", "predict", "predict: fire at the "
                  "trigger; recorded: replay the transcript's compaction blocks.",
                  _choice("predict", "recorded"), kind="choice",
                  choices=("predict", "recorded")),
    )
})


def validate_params(values: Mapping[str, Any], allowed: set[str] | None = None) -> dict[str, Any]:
    """Validate config values against their specs; unknown keys are errors.

    Invariant: either every value is returned normalised, or ParamError lists each bad field.
    """
    errors: dict[str, str] = {}
    out: dict[str, Any] = {}
    for key, value in values.items():
        spec = PARAMS.get(key)
        if spec is None or (allowed is not None and key not in allowed):
            errors[key] = "unknown parameter"
            continue
        try:
            out[key] = spec.clean(value)
        except ValueError as exc:
            errors[key] = str(exc)
    if errors:
        raise ParamError(errors)
    return out


# --- Codex CLI and OpenHands (SPEC-agents §2.5.4–§2.5.6) ---------------------------------------


def _nonempty_strings(v: Any) -> tuple[str, ...]:
    items = _string_list(v)
    if not all(items):
        raise ValueError("expected non-empty strings")
    return items


def _truncation_policy(v: Any) -> dict[str, Any] | None:
    if v is None:
        return None
    if not isinstance(v, Mapping) or set(v) != {"mode", "limit"}:
        raise ValueError('expected {"mode": "bytes"|"tokens", "limit": N} or null')
    if v["mode"] not in ("bytes", "tokens"):
        raise ValueError('mode must be "bytes" or "tokens"')
    try:
        limit = _int_range(0, 100_000_000)(v["limit"])
    except ValueError as exc:
        raise ValueError(f"limit: {exc}") from None
    return {"mode": v["mode"], "limit": limit}


# OpenHands `[condenser]` tables (openhands/core/config/condenser_config.py): per type, each
# field's default and lower bound (None: any integer; "str": a string).
CONDENSER_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "noop": {},
    "observation_masking": {"attention_window": (100, 1)},
    "recent": {"keep_first": (1, 0), "max_events": (100, 1)},
    "amortized": {"max_size": (100, 2), "keep_first": (1, 0)},
    "conversation_window": {},
    "llm": {"llm_config": (None, "str"), "keep_first": (1, 0), "max_size": (100, 2),
            "max_event_length": (10_000, None)},
    "structured": {"llm_config": (None, "str"), "keep_first": (1, 0), "max_size": (100, 2),
                   "max_event_length": (10_000, None)},
    "llm_attention": {"llm_config": (None, "str"), "max_size": (100, 2), "keep_first": (1, 0)},
    "browser_output_masking": {"attention_window": (1, 1)},
    "pipeline": {},
}
ROLLING_CONDENSERS = ("amortized", "conversation_window", "llm", "structured", "llm_attention")


def condenser_config(v: Any, where: str = "") -> dict[str, Any]:
    """One `[condenser]` table, validated like OpenHands' pydantic models (extra keys forbidden,
    same bounds); the result has every field, defaults filled in, `type` first."""
    at = f"{where}." if where else ""
    if not isinstance(v, Mapping):
        raise ValueError(f"{where or 'condenser'}: expected an object with a type")
    kind = v.get("type", "noop")
    if kind not in CONDENSER_FIELDS:
        raise ValueError(f"{at}type: unknown condenser type {kind!r} "
                         f"(known: {', '.join(CONDENSER_FIELDS)})")
    fields = CONDENSER_FIELDS[kind]
    extra = [k for k in v if k != "type" and k not in fields
             and not (kind == "pipeline" and k == "condensers")]
    if extra:
        raise ValueError(f"{at}{extra[0]}: not a field of the {kind} condenser")
    out: dict[str, Any] = {"type": kind}
    if kind == "pipeline":
        members = v.get("condensers", [])
        if not isinstance(members, list):
            raise ValueError(f"{at}condensers: expected a list of condenser tables")
        out["condensers"] = [
            condenser_config(m, f"{at}condensers[{n}]") for n, m in enumerate(members)
        ]
        return out
    for name, (default, low) in fields.items():
        value = v.get(name, default)
        if low == "str":
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{at}{name}: expected the name of an [llm.*] section")
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{at}{name}: expected an integer")
        elif low is not None and value < low:
            raise ValueError(f"{at}{name}: must be {low} or more")
        if value is not None:
            out[name] = value
    if "keep_first" in out and "max_size" in out and out["keep_first"] >= out["max_size"] // 2:
        raise ValueError(f"{at}keep_first: must be less than max_size // 2 "
                         f"({out['max_size'] // 2})")
    return out


def _condenser(v: Any) -> dict[str, Any]:
    return condenser_config(v)


CODEX_CONTEXTUAL_PREFIXES = ("<environment_context>", "<user_instructions>",
                             "# AGENTS.md instructions for ", "<user_shell_command>", "<skill>",
                             "<turn_aborted>")

PARAMS.update({p.name: p for p in (
    ParamSpec("codex_truncation_policy", "Truncation policy", None, "The model catalog's "
              'truncation_policy ({"mode": "bytes"|"tokens", "limit": N}); empty: the '
              "rollout's recorded policy, else the model table.", _truncation_policy,
              kind="object", choices=("bytes", "tokens")),
    ParamSpec("codex_use_recorded_policy", "Use recorded policy", True, "Use the policy the "
              "rollout's turn_context recorded (what Codex used) before the model table.",
              _boolean, kind="choice", choices=("true", "false")),
    ParamSpec("codex_autocompact_mode", "Codex compaction", "predict", "predict: compact when "
              "the limit is reached (recorded summaries used where they exist); recorded: "
              "replay the rollout's compactions only.", _choice("predict", "recorded"),
              kind="choice", choices=("predict", "recorded")),
    ParamSpec("codex_limit_semantics", "Configured limit", "min", "min: "
              "model_auto_compact_token_limit can only lower 90 % of the window (newer Codex); "
              "override: it replaces it (older Codex).", _choice("min", "override"),
              kind="choice", choices=("min", "override")),
    ParamSpec("codex_token_source", "Codex token source", "counter", "counter: the full prompt "
              "under ctxsim's counter; usage: the last recorded total_tokens plus ⌈bytes/4⌉ "
              "of what followed (Codex's own estimate).", _choice("counter", "usage"),
              kind="choice", choices=("counter", "usage")),
    ParamSpec("codex_user_message_budget", "User messages kept", 20000, "Approximate tokens of "
              "the most recent user messages kept after a compaction "
              "(COMPACT_USER_MESSAGE_MAX_TOKENS).", _int_range(0, 10_000_000), unit="tokens"),
    ParamSpec("codex_contextual_prefixes", "Contextual prefixes", CODEX_CONTEXTUAL_PREFIXES,
              "User messages starting with one of these are injected context, not the "
              "human's requests.", _nonempty_strings, kind="list"),
    ParamSpec("openhands_condenser_config", "OpenHands condenser", {"type": "noop"}, "The "
              "[condenser] table of OpenHands config.toml: noop, recent, observation_masking, "
              "amortized, conversation_window, llm, structured, llm_attention, pipeline.",
              _condenser, kind="object", choices=tuple(CONDENSER_FIELDS)),
    ParamSpec("openhands_max_message_chars", "Max message chars", 30000, "[llm] "
              "max_message_chars: observations longer than this are cut in the middle "
              "(negative: off).", _int_range(-1, 100_000_000), unit="characters"),
    ParamSpec("openhands_assembly", "Message assembly", "v0", "v0: OpenHands' own conversion "
              "of events into messages; plain: the kept messages in their order.",
              _choice("v0", "plain"), kind="choice", choices=("v0", "plain")),
    ParamSpec("openhands_request_over_tokens", "Condensation request over", None, "A "
              "condensation request is raised when the assembled prompt is over this many "
              "tokens (standing in for the LLM's context-window error); empty: never.",
              _opt_int_range(1, 10_000_000), unit="tokens", kind="optional-int"),
    ParamSpec("openhands_mode", "OpenHands condensation", "predict", "predict: condense as "
              "the configured condenser would; recorded: replay the recorded condensation "
              "events.", _choice("predict", "recorded"), kind="choice",
              choices=("predict", "recorded")),
)})
