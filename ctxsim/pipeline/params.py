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
    digits = body.lstrip("0") or "0"
    if len(digits) > 19:  # past int64 already; int() would refuse 4,300+ digits
        return None
    value = -int(digits) if text[0] == "-" else int(digits)
    if value > INT64_MAX or value < INT64_MIN:
        return None
    return value


def ascii_index(text: str | None) -> int | None:
    """`text` as a whole number >= 0 written in ASCII digits only (at most 18, so it fits any
    database integer), else None. `str.isdigit()` also passes `²` and other digits that int()
    refuses or reads as something else (issue 20 item 15)."""
    if text is None or not (0 < len(text) <= 18 and text.isascii() and text.isdigit()):
        return None
    return int(text)


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
    # int | optional-int | string | optional-string (empty = None) | choice | list | map
    # | env | object ({"type", "value"};
    # `choices` are its types; a None default means "none" is one) | bool_or_list (true,
    # false or a list of names); for SPEC-agents also bool, number and limits
    # (tool name → integer or null); json (a JSON object in a textarea), toml (top-level
    # TOML keys in a textarea), text | optional-text (a string of several lines), lines
    # (a list of strings, one a line, kept as typed).
    kind: str = "int"
    choices: tuple[str, ...] = ()
    # An "object" value's two keys: the one `choices` name, the one holding its number.
    pair: tuple[str, str] = ("type", "value")
    # What the form shows in an empty field, written in the value's own syntax.
    example: str = ""
    env_vars: tuple[EnvVar, ...] = ()
    # [X] (SPEC-agents §2.5.0.1): the default is ctxsim's own choice, which this vendor's
    # documentation, issues and transcripts do not settle; the UI says so (`default_note`).
    undocumented_by: str = ""

    @property
    def default_note(self) -> str:
        return (f"ctxsim's default; not documented by {self.undocumented_by}"
                if self.undocumented_by else "")

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
                  "every outgoing copy (ChatCLI's per-turn reminder); empty = none.",
                  _opt_string, kind="optional-string"),
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
                  "instructions, counted in the full prompt.", _string, kind="text"),
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


# The agent stages' parameters (SPEC-agents §2.5) follow these in the form: params_agents adds
# them to PARAMS when it loads, which this import makes sure of.
from . import params_agents  # noqa: E402, F401
