"""Scenario files (SPEC §6, reference/chatcli/README.md): a transcript plus its settings.

Every problem is reported as a `ScenarioError` naming where it is, e.g.
`messages[3].tool_calls[0].function.name: expected a string`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from . import jsontext
from .messages import ROLES, Message, Session, ToolCall

TOP_KEYS = {"description", "profile", "stages", "config", "tools", "response_schema", "messages"}
MESSAGE_KEYS = {"role", "content", "name", "tool_calls", "tool_call_id", "is_error",
                "error_code", "agent_feedback", "meta"}
CALL_KEYS = {"id", "type", "function"}
FUNCTION_KEYS = {"name", "arguments"}


class ScenarioError(ValueError):
    """A bad scenario; `where` is the path of the problem ("" for the whole file)."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}" if where else problem)


@dataclass(frozen=True)
class Scenario:
    messages: tuple[Message, ...]
    config: dict[str, Any] = field(default_factory=dict)
    profile: str | None = None
    stages: list[Any] | None = None
    tools: list[Any] | None = None
    response_schema: Any = None
    description: str = ""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def go_string(value: str) -> str:
    """A decoded JSON string as Go's decoder leaves it: Python keeps a lone surrogate escape
    (`"\\ud800"`) as a lone surrogate, Go turns it into U+FFFD (valid pairs are combined by
    both)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", value)
    return value


def _expect(value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    ok = isinstance(value, kind)
    if not ok:
        raise ScenarioError(where, f"expected {what}")
    return value


def _unknown(obj: dict[str, Any], allowed: set[str], where: str) -> None:
    extra = [k for k in obj if k not in allowed]
    if extra:
        prefix = f"{where}." if where else ""
        raise ScenarioError(f"{prefix}{extra[0]}", "unknown key")


def _content(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, list):
        texts = []
        for n, part in enumerate(value):
            _expect(part, dict, f"{where}[{n}]", "a content part object")
            if part.get("type") == "text":
                texts.append(_expect(part.get("text"), str, f"{where}[{n}].text", "a string"))
        return go_string("".join(texts))
    raise ScenarioError(where, "expected a string, null or an array of content parts")


def _arguments(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, dict):
        return go_string(json.dumps(value, separators=(",", ":"), ensure_ascii=False))
    raise ScenarioError(where, "expected a JSON string, an object or null")


def _tool_call(raw: Any, where: str) -> ToolCall:
    _expect(raw, dict, where, "a tool call object")
    _unknown(raw, CALL_KEYS, where)
    call_id = _expect(raw.get("id", ""), str, f"{where}.id", "a string")
    call_type = _expect(raw.get("type") or "function", str, f"{where}.type", "a string")
    if "function" not in raw:
        raise ScenarioError(f"{where}.function", "missing")
    fn = _expect(raw["function"], dict, f"{where}.function", "an object")
    _unknown(fn, FUNCTION_KEYS, f"{where}.function")
    if "name" not in fn:
        raise ScenarioError(f"{where}.function.name", "missing")
    name = _expect(fn["name"], str, f"{where}.function.name", "a string")
    args = _arguments(fn.get("arguments"), f"{where}.function.arguments")
    return ToolCall(id=go_string(call_id), name=go_string(name), arguments=args,
                    type=go_string(call_type))


def parse_message(raw: Any, where: str, origin: int | None = None) -> Message:
    """One OpenAI-shaped scenario message → `Message` (README's normalisation rules)."""
    _expect(raw, dict, where, "a message object")
    _unknown(raw, MESSAGE_KEYS, where)
    if "role" not in raw:
        raise ScenarioError(f"{where}.role", "missing")
    role = raw["role"]
    if role not in ROLES:
        raise ScenarioError(f"{where}.role", f"expected one of {', '.join(ROLES)}")
    fields: dict[str, Any] = {"origin": origin}
    if "name" in raw and raw["name"] is not None:
        fields["name"] = _expect(raw["name"], str, f"{where}.name", "a string")
    calls = raw.get("tool_calls")
    if calls is not None:
        _expect(calls, list, f"{where}.tool_calls", "an array")
        if calls and role != "assistant":
            raise ScenarioError(f"{where}.tool_calls", "only assistant messages carry calls")
        fields["tool_calls"] = tuple(
            _tool_call(c, f"{where}.tool_calls[{n}]") for n, c in enumerate(calls)
        )
    for key, kind, what in (("tool_call_id", str, "a string"), ("error_code", str, "a string"),
                            ("is_error", bool, "true or false"),
                            ("agent_feedback", bool, "true or false")):
        if raw.get(key) is not None:
            value = _expect(raw[key], kind, f"{where}.{key}", what)
            fields[key] = go_string(value) if isinstance(value, str) else value
    if raw.get("meta") is not None:
        fields["meta"] = _meta(raw["meta"], f"{where}.meta")
    return Message.of(role, _content(raw.get("content"), f"{where}.content"), **fields)


def _meta(raw: Any, where: str) -> dict[str, Any]:
    """A message's `meta` (SPEC §6, SPEC-agents §2.5.0.5), copied verbatim; a Codex marker's
    `replacement_history` holds scenario messages, parsed like the top-level ones."""
    meta = dict(_expect(raw, dict, where, "an object"))
    for key, value in meta.items():
        _check_meta_value(key, value, f"{where}.{key}")
    compaction = meta.get("compaction")
    if isinstance(compaction, dict) and compaction.get("replacement_history") is not None:
        nested = f"{where}.compaction.replacement_history"
        items = _expect(compaction["replacement_history"], list, nested, "an array of messages")
        compaction = dict(compaction)
        compaction["replacement_history"] = tuple(
            parse_message(m, f"{nested}[{n}]") for n, m in enumerate(items))
        meta["compaction"] = compaction
    return meta


# The shapes of the `meta` keys stages read (SPEC-agents §2.5.0.5); other keys stay verbatim.
META_OBJECTS = ("usage", "compaction", "microcompaction", "anthropic_compaction",
                "codex_truncation_policy", "openhands_condensation")
META_STRINGS = ("timestamp", "uuid", "kind")
META_STRING_LISTS = {"thinking": (), "compaction": ("preserved_uuids",),
                     "microcompaction": ("compacted_tool_ids", "cleared_attachment_uuids")}


def _check_meta_value(key: str, value: Any, where: str) -> None:
    if key == "thinking":
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise ScenarioError(where, "expected an array of strings")
    elif key in META_STRINGS and value is not None:
        _expect(value, str, where, "a string")
    elif key == "binary_parts":
        if not isinstance(value, list) or not all(isinstance(p, dict) for p in value):
            raise ScenarioError(where, "expected an array of objects")
    elif key in META_OBJECTS:
        _expect(value, dict, where, "an object")
        for field_name in META_STRING_LISTS.get(key, ()):
            inner = value.get(field_name)
            if inner is not None and (not isinstance(inner, list)
                                      or not all(isinstance(x, str) for x in inner)):
                raise ScenarioError(f"{where}.{field_name}", "expected an array of strings")


def parse_messages(raw: Any, where: str = "messages") -> tuple[Message, ...]:
    """A scenario `messages` array → messages whose `origin` is their index.

    Other modules (the `scenario` transcript importer) call this directly.
    """
    _expect(raw, list, where, "an array of messages")
    return tuple(parse_message(m, f"{where}[{n}]", n) for n, m in enumerate(raw))


def parse_scenario_data(data: Any) -> Scenario:
    """A decoded scenario object → `Scenario` (config values are checked by `profiles`)."""
    _expect(data, dict, "", "a JSON object at the top level")
    _unknown(data, TOP_KEYS, "")
    if "messages" not in data:
        raise ScenarioError("messages", "missing")
    description = data.get("description") or ""
    _expect(description, str, "description", "a string")
    profile = data.get("profile")
    if profile is not None:
        _expect(profile, str, "profile", "a string")
    stages = data.get("stages")
    if stages is not None:
        _expect(stages, list, "stages", "an array of [stage, phase] pairs")
    config = data.get("config")
    config = {} if config is None else _expect(config, dict, "config", "an object")
    tools = data.get("tools")
    if tools is not None:
        _expect(tools, list, "tools", "an array")
    schema = data.get("response_schema")
    if schema is not None:
        _expect(schema, dict, "response_schema", "an object")
    return Scenario(parse_messages(data["messages"]), dict(config), profile, stages, tools,
                    schema, description)


def load_json_text(text: str | bytes, where: str = "") -> Any:
    try:
        return jsontext.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioError(where, f"invalid JSON at line {exc.lineno} column {exc.colno}: "
                                   f"{exc.msg}") from None
    except UnicodeDecodeError:
        raise ScenarioError(where, "not UTF-8 text") from None


def parse_scenario(text: str | bytes) -> Scenario:
    return parse_scenario_data(load_json_text(text))


def is_scenario(data: Any) -> bool:
    """Scenario signature: an object with a `messages` array and only scenario keys."""
    return isinstance(data, dict) and isinstance(data.get("messages"), list) and set(
        data
    ) <= TOP_KEYS


def looks_like_scenario(data: Any) -> bool:
    """Meant as a scenario, even if broken: a scenario, or an object with `messages` and
    `config` or `profile`, or an object of scenario keys only that has `config`. Such a file
    is judged as a scenario, so its author gets the precise error (e.g. `messages: missing`)
    instead of a list of transcript formats it is not."""
    if not isinstance(data, dict):
        return False
    if is_scenario(data):
        return True
    if "messages" in data and ("config" in data or "profile" in data):
        return True
    return "config" in data and set(data) <= TOP_KEYS


def scenario_session(s: Scenario, title: str = "scenario") -> Session:
    return Session(format="scenario", title=title, messages=s.messages, tools=s.tools,
                   response_schema=s.response_schema)


__all__ = ["Scenario", "ScenarioError", "go_string", "is_scenario", "looks_like_scenario",
           "parse_messages", "parse_scenario",
           "parse_scenario_data", "scenario_session"]
