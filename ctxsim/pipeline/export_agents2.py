"""Export the part-2 agents' settings in their own configuration files, and import them back
(SPEC-agents-2): Gemini CLI `settings.json`, the OpenHands V1 SDK condenser's arguments, Roo
Code's settings export, Cline's `useAutoCondense`, Aider's `.aider.conf.yml`, OpenCode's
`opencode.json`, and mini-swe-agent (no setting: a commented file).

Same contract as `export.py`: each file carries only what the agent reads, lists what it left
out, and an import fails per field. `.aider.conf.yml` is written and read by a small emitter
for the flat `key: scalar` lines Aider's options take (ctxsim has no YAML dependency).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .export import Export, _left_out, _load_object
from .params import ParamError, validate_params

# --- Gemini CLI settings.json -----------------------------------------------------------------

GEMINI_KEYS = {  # parameter → path in settings.json
    "gemini_compression_threshold": ("model", "compressionThreshold"),
    "gemini_truncate_threshold": ("tools", "truncateToolOutputThreshold"),
    "gemini_mask_protect_tokens": ("contextManagement", "tools", "outputMasking",
                                   "protectionThresholdTokens"),
    "gemini_mask_min_prunable_tokens": ("contextManagement", "tools", "outputMasking",
                                        "minPrunableThresholdTokens"),
    "gemini_mask_protect_latest_turn": ("contextManagement", "tools", "outputMasking",
                                        "protectLatestTurn"),
}


def _nested(keys: Mapping[str, tuple[str, ...]], values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, path in keys.items():
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = values[name]
    return out


def _read_nested(keys: Mapping[str, tuple[str, ...]], obj: Mapping[str, Any],
                 what: str) -> dict[str, Any]:
    raw: dict[str, Any] = {}
    where: dict[str, str] = {}
    for name, path in keys.items():
        node: Any = obj
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            raw[name] = node
            where[name] = f"{what} {'.'.join(path)}"
    try:
        return validate_params(raw)
    except ParamError as exc:
        raise ParamError({where.get(k, k): v for k, v in exc.errors.items()}) from None


def export_gemini(values: Mapping[str, Any]) -> Export:
    notes = ["A signed-in user's remote experiment may override model.compressionThreshold "
             "(CONTEXT_COMPRESSION_THRESHOLD): the value here holds unless it is overridden."]
    if values.get("gemini_truncate_mode") == "last_lines":
        notes.append("Gemini CLI before 0.29 read tools.truncateToolOutputLines and "
                     "tools.enableToolOutputTruncation instead of the threshold.")
    text = json.dumps(_nested(GEMINI_KEYS, values), indent=2) + "\n"
    return Export("gemini-cli", "settings.json", text, _left_out("gemini-cli", values), notes)


def import_gemini(data: str) -> dict[str, Any]:
    return _read_nested(GEMINI_KEYS, _load_object(data, "settings.json"), "settings.json")


# --- OpenHands V1 SDK condenser ---------------------------------------------------------------

OPENHANDS_V1_KEYS = {"openhands_v1_max_size": "max_size",
                     "openhands_v1_keep_first": "keep_first",
                     "openhands_v1_max_tokens": "max_tokens",
                     "openhands_v1_minimum_progress": "minimum_progress"}


def export_openhands_v1(values: Mapping[str, Any]) -> Export:
    """`LLMSummarizingCondenser(...)` keyword arguments as JSON (`kind` names the class, as
    the SDK's serialised condenser does); `llm` is left to the user."""
    obj: dict[str, Any] = {"kind": "LLMSummarizingCondenser"}
    obj.update({key: values[name] for name, key in OPENHANDS_V1_KEYS.items()
                if values.get(name) is not None})
    notes = []
    if values["openhands_v1_max_size"] // 2 - values["openhands_v1_keep_first"] - 1 <= 0:
        notes.append("The SDK rejects this condenser: max_size // 2 − keep_first − 1 must be "
                     "positive.")
    notes.append("Add the condenser's llm (an LLM object) before use.")
    text = json.dumps(obj, indent=2) + "\n"
    return Export("openhands-v1", "condenser.json", text, _left_out("openhands-v1", values),
                  notes)


def import_openhands_v1(data: str) -> dict[str, Any]:
    obj = _load_object(data, "condenser.json")
    errors = {k: "unknown key" for k in obj
              if k not in (*OPENHANDS_V1_KEYS.values(), "kind", "llm")}
    if obj.get("kind", "LLMSummarizingCondenser") != "LLMSummarizingCondenser":
        errors["kind"] = "expected LLMSummarizingCondenser"
    names = {v: k for k, v in OPENHANDS_V1_KEYS.items()}
    try:
        out = validate_params({names[k]: v for k, v in obj.items() if k in names})
    except ParamError as exc:
        errors.update({OPENHANDS_V1_KEYS[k]: v for k, v in exc.errors.items()})
        out = {}
    if errors:
        raise ParamError(errors)
    if "max_tokens" in obj:
        out.setdefault("openhands_v1_max_tokens", None)
    return out


# --- Roo Code settings export, Cline ----------------------------------------------------------

ROO_KEYS = {"roo_auto_condense": "autoCondenseContext",
            "roo_condense_percent": "autoCondenseContextPercent"}


def export_roo(values: Mapping[str, Any]) -> Export:
    """Roo Code's settings export (`Settings → Export`): `globalSettings` with the two
    condensing settings; importing it in Roo Code merges them."""
    obj = {"globalSettings": {key: values[name] for name, key in ROO_KEYS.items()}}
    text = json.dumps(obj, indent=2) + "\n"
    return Export("roo-code", "roo-code-settings.json", text, _left_out("roo-code", values))


def import_roo(data: str) -> dict[str, Any]:
    obj = _load_object(data, "roo-code-settings.json")
    settings = obj.get("globalSettings", obj)
    if not isinstance(settings, Mapping):
        raise ParamError({"globalSettings": "expected an object"})
    names = {v: k for k, v in ROO_KEYS.items()}
    try:
        return validate_params({names[k]: v for k, v in settings.items() if k in names})
    except ParamError as exc:
        raise ParamError({f"globalSettings.{ROO_KEYS[k]}": v
                          for k, v in exc.errors.items()}) from None


def export_cline(values: Mapping[str, Any]) -> Export:
    """Cline has no setting for its truncation: the export says auto-compact stays off (the
    classic truncation is what runs then)."""
    text = json.dumps({"useAutoCondense": False}, indent=2) + "\n"
    return Export("cline", "cline-settings.json", text, _left_out("cline", values),
                  ["Cline's truncation has no setting; useAutoCondense (Settings → Auto "
                   "Compact) must stay off for it to be what runs."])


def import_cline(data: str) -> dict[str, Any]:
    obj = _load_object(data, "cline-settings.json")
    if obj.get("useAutoCondense", False) is not False:
        raise ParamError({"useAutoCondense": "ctxsim simulates Cline's truncation, which "
                                             "runs only with auto-compact off"})
    return {}


# --- Aider .aider.conf.yml --------------------------------------------------------------------

AIDER_KEYS = {"aider_max_chat_history_tokens": "max-chat-history-tokens"}
_PLAIN = re.compile(r"[A-Za-z0-9_./@+-]+")


def yaml_scalar(value: Any) -> str:
    """A YAML scalar for an integer, a float, a boolean, null or a string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    text = str(value)
    plain = _PLAIN.fullmatch(text) and text.lower() not in ("true", "false", "null", "yes",
                                                             "no", "on", "off", "~")
    if plain and not re.fullmatch(r"[-+]?[0-9._]+(e[-+]?[0-9]+)?", text, re.I):
        return text
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML double-quoted one


def parse_flat_yaml(text: str, what: str) -> dict[str, Any]:
    """`key: scalar` lines (comments and blank lines skipped): integers, floats, booleans,
    null, plain or double-quoted strings. Anything nested is refused with its line."""
    out: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith('"') \
            else line.rstrip()
        if not stripped.strip() or stripped.lstrip().startswith("#"):
            continue
        key, sep, raw = stripped.partition(":")
        if not sep or line[:1].isspace() or not key.strip():
            errors[f"{what} line {n}"] = "expected a top-level `key: value` line"
            continue
        raw = raw.strip()
        try:
            out[key.strip()] = _scalar(raw)
        except ValueError as exc:
            errors[f"{what} line {n}"] = str(exc)
    if errors:
        raise ParamError(errors)
    return out


def _scalar(raw: str) -> Any:
    if raw in ("", "null", "~"):
        return None
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise ValueError("unterminated or invalid double-quoted string") from None
        if not isinstance(value, str):
            raise ValueError("invalid double-quoted string")
        return value
    if raw.startswith(("[", "{", "'", "|", ">", "&", "*", "!")):
        raise ValueError("only plain scalars are read (no lists, maps or other YAML forms)")
    if re.fullmatch(r"[-+]?[0-9]+", raw):
        return int(raw)
    if re.fullmatch(r"[-+]?([0-9]*\.[0-9]+|[0-9]+\.?[0-9]*)([eE][-+]?[0-9]+)?", raw):
        return float(raw)
    return raw


def export_aider(values: Mapping[str, Any]) -> Export:
    lines = ["# Aider options (aider.chat/docs/config/aider_conf.html)"]
    value = values.get("aider_max_chat_history_tokens")
    notes = []
    if value is None:
        lines.append("# max-chat-history-tokens: unset (Aider uses max_input_tokens / 16, "
                     "between 1024 and 8192)")
    else:
        lines.append(f"max-chat-history-tokens: {yaml_scalar(value)}")
    if values.get("aider_max_input_tokens") is not None:
        notes.append("The model's max_input_tokens comes from its metadata "
                     "(.aider.model.metadata.json), not from .aider.conf.yml.")
    text = "".join(line + "\n" for line in lines)
    return Export("aider", ".aider.conf.yml", text, _left_out("aider", values), notes)


def import_aider(text: str) -> dict[str, Any]:
    doc = parse_flat_yaml(text, ".aider.conf.yml")
    names = {v: k for k, v in AIDER_KEYS.items()}
    try:
        return validate_params({names[k]: v for k, v in doc.items() if k in names})
    except ParamError as exc:
        raise ParamError({f".aider.conf.yml {AIDER_KEYS[k]}": v
                          for k, v in exc.errors.items()}) from None


def aider_ignored_keys(text: str) -> list[str]:
    return [f"{k} (not a setting ctxsim simulates; ignored)"
            for k in parse_flat_yaml(text, ".aider.conf.yml") if k not in AIDER_KEYS.values()]


# --- OpenCode opencode.json -------------------------------------------------------------------

OPENCODE_KEYS = {"opencode_auto": ("compaction", "auto"), "opencode_prune": ("compaction",
                                                                             "prune"),
                 "opencode_reserved": ("compaction", "reserved"),
                 "opencode_keep_tokens": ("compaction", "keep", "tokens")}


def export_opencode(values: Mapping[str, Any]) -> Export:
    present = {k: v for k, v in OPENCODE_KEYS.items() if values.get(k) is not None}
    obj: dict[str, Any] = {"$schema": "https://opencode.ai/config.json",
                           **_nested(present, values)}
    notes = ["compaction.keep.tokens is read by compact v2 (2026-06) releases; earlier ones "
             "ignore it."]
    limits = [n for n in ("opencode_context_limit", "opencode_input_limit",
                          "opencode_max_output") if values.get(n) is not None]
    if limits:
        notes.append("Model limits go under provider.<id>.models.<model>.limit "
                     "(context, input, output) in opencode.json: "
                     + ", ".join(f"{n} = {values[n]}" for n in limits) + ".")
    text = json.dumps(obj, indent=2) + "\n"
    return Export("opencode", "opencode.json", text, _left_out("opencode", values), notes)


def import_opencode(data: str) -> dict[str, Any]:
    return _read_nested(OPENCODE_KEYS, _load_object(data, "opencode.json"), "opencode.json")


# --- mini-swe-agent ---------------------------------------------------------------------------


def export_mini_swe(values: Mapping[str, Any]) -> Export:
    text = ("# mini-swe-agent has no setting for these limits: they are written in its\n"
            "# observation template (model.observation_template in v2,\n"
            "# agent.action_observation_template in v1), as `output | length < "
            f"{values.get('mini_swe_output_limit', 10000)}`,\n"
            f"# output[:{values.get('mini_swe_head_chars', 5000)}] and "
            f"output[-{values.get('mini_swe_tail_chars', 5000)}:].\n")
    return Export("mini-swe-agent", "mini-swe-agent.yaml", text,
                  _left_out("mini-swe-agent", values))


def import_mini_swe(text: str) -> dict[str, Any]:
    raise ParamError({"mini-swe-agent": "its limits are part of the observation template; set "
                                        "mini_swe_output_limit and the head/tail sizes here"})
