"""One codec per parameter kind (`ctxsim.pipeline.params`): how a value travels in the
session page's URL and form, is read back from them (bad text reported per field), and shows
in the thresholds form. A new parameter of a known kind needs nothing here.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ctxsim.pipeline import jsontext
from ctxsim.pipeline.export_agents import toml_lines
from ctxsim.pipeline.params import PARAMS, ParamSpec, ascii_index, env_field, env_var_of

Pairs = list[tuple[str, str]]
Errors = dict[str, str]


@dataclass(frozen=True)
class Codec:
    """How values of one parameter kind travel: `encode` gives the query pairs of a value,
    `decode` reads (present, value) back from a query (bad text goes to the errors), `form`
    gives the text a form field shows."""

    encode: Callable[[str, Any], Pairs]
    decode: Callable[[str, Mapping[str, Any], Errors], tuple[bool, Any]]
    form: Callable[[Any], Any] = lambda value: value


def split_list(text: str) -> list[str]:
    return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]


def _int(text: str, field_name: str, errors: Errors) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        errors[field_name] = f"{text.strip()!r} is not a whole number"
        return None


def _text_field(parse: Callable[[str, str, Errors], Any]):
    """A decoder for a parameter held in one field named after it."""
    def decode(name: str, query: Mapping[str, Any], errors: Errors) -> tuple[bool, Any]:
        if name not in query:
            return False, None
        return True, parse(query.get(name) or "", name, errors)
    return decode


def _plain_encode(name: str, value: Any) -> Pairs:
    return [(name, "" if value is None else str(value))]


# The form's marker that the env fields were shown: with it, fields all left empty mean "no
# variable set" (over a saved profile's values) rather than "not given". It travels beside the
# value and is never part of it.
ENV_MARKER = env_field("present")


def _env_encode(name: str, value: Any) -> Pairs:
    if not value:  # only the marker says "no variable" apart from "not given"
        return [(ENV_MARKER, "1")]
    return [(env_field(k), v) for k, v in sorted(value.items())]


def _env_decode(name: str, query: Mapping[str, Any], errors: Errors) -> tuple[bool, Any]:
    found = {var: query.get(k) for k in query
             if k != ENV_MARKER and (var := env_var_of(k)) is not None}
    values = {k: v for k, v in found.items() if v not in (None, "")}
    return bool(values) or ENV_MARKER in query, values


def _typed_encode(name: str, value: Any) -> Pairs:
    if value is None:
        return [(f"{name}.type", "none")]
    if value == "all":  # thinking_keep's other form (SPEC-agents §2.5.7)
        return [(f"{name}.type", "all")]
    kind, number = PARAMS[name].pair
    return [(f"{name}.type", value[kind]), (f"{name}.value", str(value[number]))]


def _typed_decode(name: str, query: Mapping[str, Any], errors: Errors) -> tuple[bool, Any]:
    kind = query.get(f"{name}.type")
    if kind is None:
        return False, None
    if kind == "none":
        return True, None
    if kind == "all":
        return True, "all"
    type_key, value_key = PARAMS[name].pair
    return True, {type_key: kind, value_key: _int(query.get(f"{name}.value", ""), name, errors)}


def _typed_form(spec: ParamSpec):
    """What the two fields of a typed value show: {"type": …, "value": …}."""
    def form(value: Any) -> dict[str, Any]:
        if value is None or value == "all":
            return {"type": "none" if value is None else "all", "value": None}
        kind, number = spec.pair
        return {"type": value[kind], "value": value[number]}
    return form


def _bool_or_list_text(value: Any, sep: str) -> str:
    return "true" if value is True else "false" if value in (False, None) else sep.join(value)


def _bool_or_list(text: str, name: str, errors: Errors) -> Any:
    lowered = text.strip().lower()
    if lowered in ("true", "false", ""):
        return lowered == "true"
    return split_list(text)


def _map(text: str, name: str, errors: Errors) -> dict[str, str]:
    pairs = {}
    for part in split_list(text):
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            errors[name] = f"{part!r}: write each mapping as Tool=@plugin"
            continue
        pairs[key.strip()] = value.strip()
    return pairs


def _number(optional: bool):
    def parse(text: str, name: str, errors: Errors) -> Any:
        if not text.strip():
            # An empty required number stays text: validation names the problem.
            return None if optional else text
        return _int(text, name, errors)
    return parse


def _optional_text(text: str, name: str, errors: Errors) -> str | None:
    # An optional field left empty is "not set", never an empty value (an empty anchor text
    # would be injected into every call).
    return text if text.strip() else None


def _flag(text: str, name: str, errors: Errors) -> Any:
    # Anything but true/false stays text: validation names the problem.
    return {"true": True, "false": False}.get(text.strip().lower(), text)


def _decimal(text: str, name: str, errors: Errors) -> Any:
    try:
        number = float(text.strip())
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text else number


def _limits_text(value: Any, sep: str) -> str:
    return sep.join(f"{k}={'null' if v is None else v}" for k, v in sorted((value or {}).items()))


def _limits(text: str, name: str, errors: Errors) -> dict[str, Any]:
    """`Tool=50000, Read=null`: a per-tool limit, or null for none."""
    pairs: dict[str, Any] = {}
    for part in split_list(text):
        key, sep, value = part.partition("=")
        value = value.strip()
        if not sep or not key.strip() or not (value == "null" or ascii_index(value) is not None):
            errors[name] = f"{part!r}: write each entry as Tool=50000 or Tool=null"
            continue
        pairs[key.strip()] = None if value == "null" else int(value)
    return pairs


def _lines(text: str) -> str:
    """A textarea's text as typed: browsers send its line breaks as CRLF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _json_text(value: Any) -> str:
    return "" if not value else json.dumps(value, ensure_ascii=False)


def _json_form(value: Any) -> str:
    """A JSON value as the form shows it: on one line while short, else indented."""
    text = _json_text(value)
    return text if len(text) <= 60 else json.dumps(value, ensure_ascii=False, indent=2)


def _json(text: str, name: str, errors: Errors) -> Any:
    """A JSON object typed into a textarea; empty is an empty object."""
    if not text.strip():
        return {}
    try:
        value = jsontext.loads(_lines(text))
    except json.JSONDecodeError as exc:
        errors[name] = f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        return None
    if not isinstance(value, dict):
        errors[name] = "write a JSON object: {\"key\": value, …}"
        return None
    return value


def _toml_text(value: Any) -> str:
    return toml_lines(value or {})


def _toml(text: str, name: str, errors: Errors) -> Any:
    """Top-level TOML keys typed into a textarea (`key = value`, one a line)."""
    try:
        return tomllib.loads(_lines(text))
    except tomllib.TOMLDecodeError as exc:
        errors[name] = f"not valid TOML: {exc}"
        return None


def _multiline(optional: bool):
    def parse(text: str, name: str, errors: Errors) -> Any:
        text = _lines(text)
        return None if optional and not text.strip() else text
    return parse


_PLAIN = Codec(_plain_encode, _text_field(lambda text, name, errors: text))
CODECS: dict[str, Codec] = {
    "env": Codec(_env_encode, _env_decode),
    "object": Codec(_typed_encode, _typed_decode),  # its form: `_typed_form`
    "json": Codec(lambda name, value: [(name, _json_text(value))], _text_field(_json),
                  _json_form),
    "toml": Codec(lambda name, value: [(name, _toml_text(value))], _text_field(_toml),
                  _toml_text),
    "lines": Codec(lambda name, value: [(name, "\n".join(value))],
                   _text_field(lambda text, name, errors: [
                       line for line in _lines(text).split("\n") if line.strip()]),
                   lambda value: "\n".join(value or ())),
    "text": Codec(_plain_encode, _text_field(_multiline(optional=False))),
    "optional-text": Codec(_plain_encode, _text_field(_multiline(optional=True))),
    "bool_or_list": Codec(
        lambda name, value: [(name, _bool_or_list_text(value, ","))],
        _text_field(_bool_or_list), lambda value: _bool_or_list_text(value, ", ")),
    "list": Codec(lambda name, value: [(name, ",".join(value))],
                  _text_field(lambda text, name, errors: split_list(text)),
                  lambda value: ", ".join(value or ())),
    "map": Codec(lambda name, value: [(name, ",".join(f"{k}={v}"
                                                       for k, v in sorted(value.items())))],
                 _text_field(_map),
                 lambda value: ", ".join(f"{k}={v}" for k, v in (value or {}).items())),
    "int": Codec(_plain_encode, _text_field(_number(optional=False))),
    "optional-int": Codec(_plain_encode, _text_field(_number(optional=True))),
    "string": _PLAIN,
    "optional-string": Codec(_plain_encode, _text_field(_optional_text)),
    "choice": _PLAIN,
    # SPEC-agents §2.5: true/false flags, decimal numbers, per-tool limits with null.
    "bool": Codec(lambda name, value: [(name, "true" if value else "false")],
                  _text_field(_flag), lambda value: "true" if value else "false"),
    "number": Codec(_plain_encode, _text_field(_decimal)),
    "limits": Codec(lambda name, value: [(name, _limits_text(value, ","))],
                    _text_field(_limits), lambda value: _limits_text(value, ", ")),
}


def codec_of(spec: ParamSpec) -> Codec:
    # The one place that knows `clear_tool_inputs` was declared `kind="object"` before the
    # parameter table gained the "bool_or_list" kind; drop the name test once it has.
    if spec.kind == "bool_or_list" or spec.name == "clear_tool_inputs":
        return CODECS["bool_or_list"]
    return CODECS[spec.kind]


def form_value(spec: ParamSpec, value: Any) -> Any:
    """What the thresholds form shows for `value` of this parameter."""
    if spec.kind == "object":
        return _typed_form(spec)(value)
    return codec_of(spec).form(value)
