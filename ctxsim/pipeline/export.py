"""Export a profile back to the real tools, and import their settings (SPEC §4).

Each format carries only what its tool understands; an export lists what it left out. Import
rejects unknown keys and bad values with a message per field, so export → import gives back
the same values for everything the format carries.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import jsontext
from .params import CHATCLI_ENV, ENV_BY_NAME, PARAMS, ParamError, validate_params
from .profiles import CHATCLI_STAGES, RunConfig
from .registry import STAGES, exported_params, family_params

ANTHROPIC_EDIT = "clear_tool_uses_20250919"
COMPRESSION_VAR = "CHATCLI_COMPRESSION"


@dataclass(frozen=True)
class Export:
    """One artefact for one tool: its text, a file name, and what it could not carry."""

    tool: str
    filename: str
    content: str
    left_out: list[str] = field(default_factory=list)
    # Warnings about how the tool reads what was exported (SPEC-agents §2.5.3, §2.5.8).
    notes: list[str] = field(default_factory=list)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _left_out(family: str, values: Mapping[str, Any]) -> list[str]:
    """The tool's parameters its format does not carry (`StageDef.exported`) that differ from
    their default, then the counter (an estimate of ctxsim's, in no tool's settings)."""
    notes = []
    carried = exported_params(family)
    for name in family_params(family):
        if name in carried:
            continue
        value, default = _plain(values.get(name)), _plain(PARAMS[name].default)
        if value != default:
            notes.append(f"{name} = {json.dumps(value, ensure_ascii=False)}")
    if values.get("counter") != PARAMS["counter"].default:
        notes.append(f"counter = {json.dumps(values.get('counter'))} (ctxsim's estimate only)")
    if values.get("image_rule", "auto") != PARAMS["image_rule"].default:
        notes.append(f"image_rule = {json.dumps(values.get('image_rule'))} "
                     "(ctxsim's estimate only)")
    return notes


# --- ChatCLI ---------------------------------------------------------------------------------

def _env_value(value: str) -> str:
    if value and all(c.isalnum() or c in "+-_./@:," for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def export_chatcli(values: Mapping[str, Any],
                   stages: tuple[tuple[str, str], ...] = CHATCLI_STAGES) -> Export:
    """`CHATCLI_...=value` lines: the env values as typed, and `ccr` off as compression off."""
    env = values.get("env") or {}
    lines = [f"{var.name}={_env_value(env[var.name])}" for var in CHATCLI_ENV if var.name in env]
    if values.get("ccr") == "off":
        lines.append(f"{COMPRESSION_VAR}=off")
    left = _left_out("chatcli", values)
    left += [f"env {k} (not a ChatCLI variable)" for k in env if k not in ENV_BY_NAME]
    chatcli_stages = tuple(e for e in stages if STAGES[e[0]].family == "chatcli")
    if chatcli_stages != CHATCLI_STAGES:
        left.append("stage list (ChatCLI's stages and order are fixed)")
    return Export("chatcli", "chatcli.env", "".join(line + "\n" for line in lines), left)


def import_chatcli(text: str) -> dict[str, Any]:
    """An env file → `{"env": {...}, "ccr": ...}`; values stay free strings, as ChatCLI reads.
    The file is read as dotenv tools read it (python-dotenv: quotes, escapes, comments,
    `export`); each bad line is an error naming its line."""
    import io

    from dotenv.parser import parse_stream

    env: dict[str, str] = {}
    errors: dict[str, str] = {}
    result: dict[str, Any] = {}
    for binding in parse_stream(io.StringIO(text)):
        n, line = binding.original.line, binding.original.string.strip()
        name = binding.key or ""
        where = f"line {n}: {name or line}"
        if binding.error:
            errors[where] = "not a NAME=value line (an unterminated quote?)"
            continue
        if binding.key is None:
            continue  # a blank line or a comment
        value = binding.value
        if value is None:
            errors[where] = "expected NAME=value"
        elif name == COMPRESSION_VAR:
            result["ccr"] = "off" if value.strip().lower() == "off" else "on"
        elif name in ENV_BY_NAME:
            env[name] = value
        else:
            errors[where] = "unknown variable (ctxsim reads CHATCLI_TOOL_RESULT_*, " \
                            "CHATCLI_MICROCOMPACT_* and CHATCLI_COMPRESSION)"
    if errors:
        raise ParamError(errors)
    if env:
        result["env"] = env
    return validate_params(result)


# --- AIVAX -----------------------------------------------------------------------------------

AIVAX_KEYS = ("contextMaximumSize", "contextOverflowAction", "toolContextCount")


def export_aivax(values: Mapping[str, Any]) -> Export:
    """The gateway JSON fragment; an unset limit is left out of it (AIVAX's own default)."""
    fragment: dict[str, Any] = {}
    if values.get("contextMaximumSize") is not None:
        fragment["contextMaximumSize"] = values["contextMaximumSize"]
    fragment["contextOverflowAction"] = values.get("contextOverflowAction", "Throw")
    fragment["toolContextCount"] = values.get("toolContextCount", 0)
    text = json.dumps(fragment, indent=2) + "\n"
    return Export("aivax", "aivax.json", text, _left_out("aivax", values))


def _load_object(data: str | Mapping[str, Any], what: str) -> Mapping[str, Any]:
    if isinstance(data, str):
        try:
            data = jsontext.loads(data)
        except json.JSONDecodeError as exc:
            raise ParamError({what: f"invalid JSON at line {exc.lineno} column {exc.colno}: "
                                    f"{exc.msg}"}) from None
    if not isinstance(data, Mapping):
        raise ParamError({what: "expected a JSON object"})
    return data


def import_aivax(data: str | Mapping[str, Any]) -> dict[str, Any]:
    """The gateway fragment → parameters; unknown keys and bad values fail per field."""
    obj = _load_object(data, "aivax")
    errors = {k: "unknown key" for k in obj if k not in AIVAX_KEYS}
    try:
        values = validate_params({k: v for k, v in obj.items() if k in AIVAX_KEYS})
    except ParamError as exc:
        errors.update(exc.errors)
        values = {}
    if errors:
        raise ParamError(errors)
    values.setdefault("contextMaximumSize", None)
    return values


# --- Anthropic -------------------------------------------------------------------------------

EDIT_KEYS = ("trigger", "keep", "clear_at_least", "exclude_tools", "clear_tool_inputs")


def export_anthropic(values: Mapping[str, Any]) -> Export:
    """The request's `context_management` object with one `clear_tool_uses_20250919` edit."""
    edit: dict[str, Any] = {"type": ANTHROPIC_EDIT,
                            "trigger": dict(values["trigger"]), "keep": dict(values["keep"])}
    if values.get("clear_at_least") is not None:
        edit["clear_at_least"] = dict(values["clear_at_least"])
    if values.get("exclude_tools"):
        edit["exclude_tools"] = list(values["exclude_tools"])
    clear_inputs = values.get("clear_tool_inputs", False)
    if clear_inputs is not False:
        edit["clear_tool_inputs"] = _plain(clear_inputs)
    text = json.dumps({"edits": [edit]}, indent=2) + "\n"
    return Export("anthropic", "context_management.json", text,
                  _left_out("anthropic", values))


def import_anthropic(data: str | Mapping[str, Any]) -> dict[str, Any]:
    """A `context_management` object → parameters of `clear_tool_uses`; a request fragment
    (`{"context_management": …, "betas": …}`, SPEC-agents §2.5.9) → the parameters of every
    edit it holds."""
    obj = _load_object(data, "context_management")
    if "context_management" in obj or export_agents.has_agent_edits(obj):
        return export_agents.import_anthropic_request(obj)
    errors = {k: "unknown key" for k in obj if k != "edits"}
    edits = obj.get("edits")
    if not isinstance(edits, list) or len(edits) != 1 or not isinstance(edits[0], Mapping):
        errors["edits"] = f"expected a list with one {ANTHROPIC_EDIT} edit"
        raise ParamError(errors)
    edit = edits[0]
    if edit.get("type") != ANTHROPIC_EDIT:
        errors["edits[0].type"] = f"expected {ANTHROPIC_EDIT!r}"
    errors.update({f"edits[0].{k}": "unknown key" for k in edit
                   if k not in EDIT_KEYS and k != "type"})
    try:
        values = validate_params({k: v for k, v in edit.items() if k in EDIT_KEYS})
    except ParamError as exc:
        errors.update({f"edits[0].{k}": v for k, v in exc.errors.items()})
        values = {}
    if errors:
        raise ParamError(errors)
    for name in EDIT_KEYS:
        values.setdefault(name, PARAMS[name].default)
    return values



# The agent tools' formats (SPEC-agents §2.5.9) build on the definitions above, so they are
# imported here and looked up when called (which works whichever module loads first).
from . import export_agents  # noqa: E402
from . import export_agents2 as agents2  # noqa: E402

# --- whole profiles --------------------------------------------------------------------------

def export_profile(config: RunConfig) -> list[Export]:
    """One artefact per tool the profile's stages model (a stacked profile gives several)."""
    families = []
    for stage, _ in config.stages:
        family = STAGES[stage].family
        if family not in families:
            families.append(family)
    return [FORMATS[family].export(config) for family in families]


def _export_anthropic_any(config: RunConfig) -> Export:
    """The bare `context_management` of SPEC §4 for clear_tool_uses alone; the request
    fragment with `betas` (SPEC-agents §2.5.9) once a compaction or thinking edit is in."""
    if any(s in ("anthropic_compact", "clear_thinking") for s, _ in config.stages):
        return export_agents.export_anthropic_request(config.values, config.stages)
    return export_anthropic(config.values)


@dataclass(frozen=True)
class Format:
    """A tool's own configuration: how a profile is written in it and read back from it."""

    export: Callable[[RunConfig], Export]
    load: Callable[[str], dict[str, Any]]


# One per family of `registry.FAMILIES`.
FORMATS: dict[str, Format] = {
    "chatcli": Format(lambda c: export_chatcli(c.values, c.stages), import_chatcli),
    "aivax": Format(lambda c: export_aivax(c.values), import_aivax),
    "anthropic": Format(lambda c: _export_anthropic_any(c), import_anthropic),
    "claude-code": Format(lambda c: export_agents.export_claude_code(c.values, c.stages),
                          lambda text: export_agents.import_claude_code(text)),
    "codex": Format(lambda c: export_agents.export_codex(c.values),
                    lambda text: export_agents.import_codex(text)),
    "openhands": Format(lambda c: export_agents.export_openhands(c.values),
                        lambda text: export_agents.import_openhands(text)),
    # SPEC-agents-2 (export_agents2)
    "gemini-cli": Format(lambda c: agents2.export_gemini(c.values), agents2.import_gemini),
    "openhands-v1": Format(lambda c: agents2.export_openhands_v1(c.values),
                           agents2.import_openhands_v1),
    "cline": Format(lambda c: agents2.export_cline(c.values), agents2.import_cline),
    "roo-code": Format(lambda c: agents2.export_roo(c.values), agents2.import_roo),
    "aider": Format(lambda c: agents2.export_aider(c.values), agents2.import_aider),
    "opencode": Format(lambda c: agents2.export_opencode(c.values), agents2.import_opencode),
    "mini-swe-agent": Format(lambda c: agents2.export_mini_swe(c.values),
                             agents2.import_mini_swe),
}
IMPORTERS = {name: f.load for name, f in FORMATS.items()}
# What an import by paste reads past and drops, as notes for the user (formats whose files
# hold more than ctxsim simulates).
IMPORT_NOTES: dict[str, Callable[[str], list[str]]] = {
    "claude-code": lambda text: export_agents.claude_code_ignored_keys(text),
    "codex": lambda text: export_agents.codex_ignored_keys(text),
    "openhands": lambda text: export_agents.openhands_ignored_keys(text),
    "aider": agents2.aider_ignored_keys,
}
