"""Export the agent tools' settings and import them back (SPEC-agents §2.5.9): Anthropic's
request fragment (compaction, thinking and tool-use edits), Claude Code's settings.json, Codex
CLI's and OpenHands' config.toml.

Same contract as `export.py`, whose `FORMATS` lists these formats beside ChatCLI's, AIVAX's and
the bare `context_management` of SPEC §4: each carries only what its tool understands, lists
what it left out, and an import fails per field.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from .export import (
    ANTHROPIC_EDIT,
    EDIT_KEYS,
    Export,
    _left_out,
    _load_object,
    _plain,
    export_anthropic,
)
from .params import PARAMS, ParamError, validate_params
from .registry import STAGES

# --- Anthropic request fragment: compaction, thinking, tool uses (SPEC-agents §2.5.9) --------

COMPACT_EDIT = "compact_20260112"
THINKING_EDIT = "clear_thinking_20251015"
EDIT_ORDER = (("anthropic_compact", COMPACT_EDIT), ("clear_thinking", THINKING_EDIT),
              ("clear_tool_uses", ANTHROPIC_EDIT))
BETAS = {COMPACT_EDIT: "compact-2026-01-12", THINKING_EDIT: "context-management-2025-06-27",
         ANTHROPIC_EDIT: "context-management-2025-06-27"}
AGENT_STAGE_LEFT_OUT = {
    "anthropic_compact": ("anthropic_compact_mode", "summary_placeholder_tokens"),
    "clear_thinking": (),
    "clear_tool_uses": ("placeholder",),
}


def _tool_uses_edit(values: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(export_anthropic(values).content)["edits"][0]


def _compact_edit(values: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    edit = {"type": COMPACT_EDIT, "trigger": dict(values["compact_trigger"]),
            "pause_after_compaction": bool(values["compact_pause_after_compaction"])}
    if values.get("compact_instructions") is not None:
        edit["instructions"] = values["compact_instructions"]
    return edit, ("compact_20260112: append the whole response content (not only its text) to "
                  "the messages, so the compaction block is sent back")


def _thinking_edit(values: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    keep = values["thinking_keep"]
    return {"type": THINKING_EDIT, "keep": keep if keep == "all" else dict(keep)}, ""


# Each Anthropic gateway stage's edit: (edit, a note for the user or "").
EDIT_BUILDERS = {
    "anthropic_compact": _compact_edit,
    "clear_thinking": _thinking_edit,
    "clear_tool_uses": lambda values: (_tool_uses_edit(values), ""),
}


def export_anthropic_request(values: Mapping[str, Any], stages: tuple) -> Export:
    """`{"context_management": {"edits": [...]}, "betas": [...]}`: one edit per Anthropic
    gateway stage, always compact → clear_thinking → clear_tool_uses."""
    present = [s for s, _ in stages if STAGES[s].family == "anthropic"]
    edits: list[dict[str, Any]] = []
    left: list[str] = []
    notes: list[str] = []
    for stage, _ in EDIT_ORDER:
        if stage not in present:
            continue
        edit, note = EDIT_BUILDERS[stage](values)
        edits.append(edit)
        if note:
            notes.append(note)
        for name in AGENT_STAGE_LEFT_OUT[stage]:
            value, default = _plain(values.get(name)), _plain(PARAMS[name].default)
            if value != default:
                left.append(f"{name} = {json.dumps(value, ensure_ascii=False)}")
    if present != [s for s, _ in EDIT_ORDER if s in present]:
        notes.append("edits exported in the order the API needs (compact_20260112, "
                     "clear_thinking_20251015, clear_tool_uses_20250919); the simulation ran "
                     "them in the profile's order")
    betas = list(dict.fromkeys(BETAS[e["type"]] for e in edits))
    text = json.dumps({"context_management": {"edits": edits}, "betas": betas}, indent=2) + "\n"
    return Export("anthropic", "context_management.json", text, left, notes)


def has_agent_edits(obj: Mapping[str, Any]) -> bool:
    edits = obj.get("edits")
    return isinstance(edits, list) and any(
        isinstance(e, Mapping) and e.get("type") in (COMPACT_EDIT, THINKING_EDIT) for e in edits)


def import_anthropic_request(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The request fragment (or a bare `context_management` with several edits) → the
    parameters of each edit; `betas` is checked to be a list of strings, then not needed."""
    errors: dict[str, str] = {}
    cm = obj.get("context_management", obj)
    if "context_management" in obj:
        errors.update({k: "unknown key" for k in obj if k not in ("context_management", "betas")})
        betas = obj.get("betas", [])
        if not isinstance(betas, list) or not all(isinstance(b, str) for b in betas):
            errors["betas"] = "expected a list of strings"
    if not isinstance(cm, Mapping):
        raise ParamError({"context_management": "expected an object"})
    errors.update({f"context_management.{k}": "unknown key" for k in cm if k != "edits"})
    edits = cm.get("edits")
    if not isinstance(edits, list) or not edits:
        errors["context_management.edits"] = "expected a non-empty list of edits"
        raise ParamError(errors)
    raw: dict[str, Any] = {}
    seen: set[Any] = set()
    for n, edit in enumerate(edits):
        where = f"edits[{n}]"
        if not isinstance(edit, Mapping):
            errors[where] = "expected an object"
            continue
        kind = edit.get("type")
        if kind in seen:
            errors[f"{where}.type"] = f"{kind} is listed twice"
            continue
        seen.add(kind)
        if kind == COMPACT_EDIT:
            keys = {"trigger": "compact_trigger", "instructions": "compact_instructions",
                    "pause_after_compaction": "compact_pause_after_compaction"}
        elif kind == THINKING_EDIT:
            keys = {"keep": "thinking_keep"}
        elif kind == ANTHROPIC_EDIT:
            keys = {k: k for k in EDIT_KEYS}
        else:
            errors[f"{where}.type"] = (f"expected one of {COMPACT_EDIT}, {THINKING_EDIT}, "
                                       f"{ANTHROPIC_EDIT}")
            continue
        errors.update({f"{where}.{k}": "unknown key" for k in edit
                       if k not in keys and k != "type"})
        part = {keys[k]: v for k, v in edit.items() if k in keys}
        try:
            cleaned = validate_params(part)
        except ParamError as exc:
            errors.update({f"{where}.{k}": v for k, v in exc.errors.items()})
            continue
        for name in keys.values():
            cleaned.setdefault(name, PARAMS[name].default)
        raw.update(cleaned)
    if errors:
        raise ParamError(errors)
    return raw


def anthropic_stages(values: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The gateway stages an imported Anthropic fragment configures, in the export's order."""
    has = {"anthropic_compact": "compact_trigger" in values,
           "clear_thinking": "thinking_keep" in values, "clear_tool_uses": "trigger" in values}
    return tuple((s, "gateway") for s, _ in EDIT_ORDER if has[s])


# --- Claude Code settings.json (SPEC-agents §2.5.9) -------------------------------------------

CLAUDE_LEFT_OUT = {
    "claude_code_tool_output": ("cc_bash_mode", "cc_mcp_mode", "cc_bash_tools",
                                "cc_bash_persist_trim", "cc_mcp_truncation_notice",
                                "cc_mcp_precheck_factor", "cc_preview_cut",
                                "cc_persist_threshold_chars", "cc_persist_overrides",
                                "cc_tool_results_dir", "cc_read_cap"),
    "claude_code_microcompact": ("cc_microcompact_trigger", "cc_microcompact_gap_minutes",
                                 "cc_microcompact_keep_recent", "cc_microcompact_count_trigger",
                                 "cc_microcompact_tools", "cc_microcompact_placeholder"),
    "claude_code_autocompact": ("cc_autocompact_buffer_tokens", "cc_summary_reserve_tokens",
                                "cc_context_window", "cc_max_output_tokens", "cc_model",
                                "cc_autocompact_mode", "cc_token_source", "cc_summary_template",
                                "summary_placeholder_tokens"),
}


# Stages Claude Code has no setting for at all: their parameters are always listed as left out.
CLAUDE_NO_SETTING = frozenset({"claude_code_microcompact"})


def export_claude_code(values: Mapping[str, Any], stages: tuple) -> Export:
    """`{"env": {...}}` for `.claude/settings.json`: the non-empty `claude_env` entries, keys
    sorted. Everything else is ctxsim's or a version choice, and listed as left out (the
    microcompact parameters always: Claude Code has no setting for them)."""
    env = {k: v for k, v in sorted((values.get("claude_env") or {}).items()) if v != ""}
    left: list[str] = []
    for stage, _ in stages:
        for name in CLAUDE_LEFT_OUT.get(stage, ()):
            value = _plain(values.get(name))
            if stage in CLAUDE_NO_SETTING or value != _plain(PARAMS[name].default):
                left.append(f"{name} = {json.dumps(value, ensure_ascii=False)}")
    notes = []
    if "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE" in env:
        notes.append("Several users report CLAUDE_AUTOCOMPACT_PCT_OVERRIDE in the settings.json "
                     "env block being ignored by the app's own threshold, and working only when "
                     "exported in the shell (anthropics/claude-code#36381, #63186, #64773); one "
                     "report (jundot/omlx#2400) claims a fraction such as \"0.8\" works, which "
                     "ctxsim, following the documented percentage (1-100), reads as 0.8 %.")
    text = json.dumps({"env": env}, indent=2, ensure_ascii=False) + "\n"
    return Export("claude-code", "settings.json", text, left, notes)


def import_claude_code(data: str | Mapping[str, Any]) -> dict[str, Any]:
    """A settings.json (or its `env` fragment) → `{"claude_env": {...}}`; the file's other
    keys are Claude Code settings ctxsim does not simulate and are ignored."""
    obj = _load_object(data, "settings.json")
    env = obj.get("env", {})
    if not isinstance(env, Mapping):
        raise ParamError({"env": "expected an object of strings"})
    return validate_params({"claude_env": dict(env)})


def claude_code_ignored_keys(data: str | Mapping[str, Any]) -> list[str]:
    """The note an import shows: the top-level keys of settings.json other than `env`."""
    obj = _load_object(data, "settings.json")
    return [f"{k} (not a setting ctxsim simulates; ignored)" for k in obj if k != "env"]


# --- Codex CLI (SPEC-agents §2.5.4, §2.5.5, §2.5.9) -------------------------------------------

CODEX_KEYS = ("model", "model_context_window", "model_auto_compact_token_limit",
              "tool_output_token_limit")
# Codex config keys ctxsim knows of but does not simulate: an import notes and drops them.
CODEX_NOT_SIMULATED = ("model_auto_compact_token_limit_scope",)


def _toml(doc: Mapping[str, Any]) -> str:
    """A TOML document written by tomli-w, keys in the given order. TOML has no null: a key
    whose value is None is left out, which is how the tools read "not set"."""
    import tomli_w

    def plain(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: plain(v) for k, v in value.items() if v is not None}
        return list(value) if isinstance(value, tuple) else value

    return tomli_w.dumps(plain(doc))


def toml_lines(config: Mapping[str, Any]) -> str:
    """`codex_config` as the top-level lines of a config.toml, in the order model, window,
    compaction limit, tool-output limit (what the export and the thresholds form show)."""
    known = [k for k in CODEX_KEYS if k in config] + [k for k in config if k not in CODEX_KEYS]
    return _toml({key: config[key] for key in known})


def export_codex(values: Mapping[str, Any]) -> Export:
    """`~/.codex/config.toml` lines for the keys present in `codex_config` (`toml_lines`;
    top-level keys precede tables)."""
    config = values.get("codex_config") or {}
    text = toml_lines(config)
    left = _left_out("codex", values)
    notes = []
    if values.get("codex_truncation_policy") is not None:
        text = ("# codex_truncation_policy is a model-catalog field: Codex exposes only "
                "tool_output_token_limit\n" + text)
        notes.append("Codex has no setting for the truncation policy's mode; only "
                     "tool_output_token_limit (the limit) can be configured.")
    return Export("codex", "config.toml", text, left, notes)


def _load_toml(text: str, what: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ParamError({what: f"invalid TOML: {exc}"}) from None
    except ValueError:  # an integer past Python's 4,300-digit limit (issue 28 item 11)
        raise ParamError({_long_integer_field(text, what): "the integer is too long "
                          f"(more than {sys.get_int_max_str_digits()} digits)"}) from None


QUOTES = "\"'"
_TABLE_LINE = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+")
_KEY_LINE = re.compile(r"^\s*([^=#\s][^=#]*?)\s*=")


def _long_integer_field(text: str, what: str) -> str:
    """`what` and the key (`[table] key`) whose value is the over-long integer, else `what`."""
    table = ""
    for line in text.splitlines():
        header = _TABLE_LINE.match(line)
        if header and "=" not in line.split("]")[0]:
            table = f"[{header.group(1)}] "
            continue
        key = _KEY_LINE.match(line)
        if key and re.search(rf"\d[\d_]{{{sys.get_int_max_str_digits()},}}", line):
            return f"{what} {table}{key.group(1).strip(QUOTES)}"
    return what


def import_codex(text: str) -> dict[str, Any]:
    """A config.toml → `{"codex_config": {...}}` with the four keys ctxsim simulates; bad
    values (a string or float where Codex wants an integer) fail per field."""
    doc = _load_toml(text, "config.toml")
    config = {k: doc[k] for k in CODEX_KEYS if k in doc}
    try:
        return validate_params({"codex_config": config})
    except ParamError as exc:
        raise ParamError({f"config.toml {k}": v for k, v in exc.errors.items()}) from None


def codex_ignored_keys(text: str) -> list[str]:
    """The notes an import shows: keys and tables of config.toml ctxsim does not read."""
    doc = _load_toml(text, "config.toml")
    notes = []
    for key, value in doc.items():
        if key in CODEX_KEYS:
            continue
        if key == "profiles" and isinstance(value, Mapping):
            notes.append(f"[profiles.{', '.join(value)}] (profile tables are not merged; "
                         "ignored)")
        elif key in CODEX_NOT_SIMULATED:
            notes.append(f"{key} (not simulated by ctxsim; ignored)")
        else:
            notes.append(f"{key} (not a setting ctxsim simulates; ignored)")
    return notes


# --- OpenHands (SPEC-agents §2.5.6, §2.5.9) ----------------------------------------------------

PIPELINE_HINT = ("A condenser pipeline cannot be written as a [condenser] table (OpenHands' TOML "
                 "loader has no nested tables); the OpenHands server builds its default pipeline "
                 "from enable_default_condenser = true and condenser_max_size.")


def export_openhands(values: Mapping[str, Any]) -> Export:
    """OpenHands `config.toml`: the `[condenser]` table (type first, then every field) and
    `[llm] max_message_chars`; a pipeline is left out with a hint."""
    condenser = dict(values.get("openhands_condenser_config") or {"type": "noop"})
    doc: dict[str, Any] = {}
    left = _left_out("openhands", values)
    notes = []
    if condenser.get("type") == "pipeline":
        left.insert(0, "openhands_condenser_config = "
                       + json.dumps(condenser, ensure_ascii=False))
        notes.append(PIPELINE_HINT)
    else:
        doc["condenser"] = condenser
        if condenser.get("type") in ("llm", "structured", "llm_attention") and \
                condenser.get("llm_config") is None:
            notes.append("OpenHands needs llm_config (the name of an [llm.<name>] section) "
                         "for this condenser; add it before use.")
    doc["llm"] = {"max_message_chars": values.get("openhands_max_message_chars", 30000)}
    return Export("openhands", "config.toml", _toml(doc), left, notes)


def import_openhands(text: str) -> dict[str, Any]:
    """An OpenHands config.toml → `openhands_condenser_config` (from `[condenser]`) and
    `openhands_max_message_chars` (from `[llm]`), each only when present."""
    doc = _load_toml(text, "config.toml")
    raw: dict[str, Any] = {}
    condenser = doc.get("condenser")
    if condenser is not None:
        if not isinstance(condenser, Mapping):
            raise ParamError({"[condenser]": "expected a table"})
        raw["openhands_condenser_config"] = dict(condenser)
    llm = doc.get("llm")
    if isinstance(llm, Mapping) and "max_message_chars" in llm:
        raw["openhands_max_message_chars"] = llm["max_message_chars"]
    try:
        return validate_params(raw)
    except ParamError as exc:
        names = {"openhands_condenser_config": "[condenser]",
                 "openhands_max_message_chars": "[llm] max_message_chars"}
        raise ParamError({names.get(k, k): v for k, v in exc.errors.items()}) from None


def openhands_ignored_keys(text: str) -> list[str]:
    """The notes an import shows: what of the file ctxsim does not read."""
    doc = _load_toml(text, "config.toml")
    notes = [f"[{k}] (not a setting ctxsim simulates; ignored)" if isinstance(v, Mapping)
             else f"{k} (not a setting ctxsim simulates; ignored)"
             for k, v in doc.items() if k not in ("condenser", "llm")]
    llm = doc.get("llm")
    if isinstance(llm, Mapping):
        notes += [f"[llm] {k} (ignored)" for k in llm if k != "max_message_chars"]
    condenser = doc.get("condenser")
    if isinstance(condenser, Mapping) and condenser.get("type") == "pipeline":
        notes.append("OpenHands' TOML loader does not build a pipeline (it falls back to noop); "
                     "ctxsim simulates it as written.")
    return notes
