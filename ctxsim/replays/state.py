"""What decides a replay, and how it travels in a URL or a form.

The session page's state (profile, stage list, parameter values, selected call) lives in the
URL. `settings_from_query` turns a query (GET or POST) into a frozen `ReplaySettings`,
reporting bad values per field; `ReplaySettings.query` writes the canonical query back. Each
parameter kind has one `Codec` (its URL/form fields, its parsing, its form text), so a new
parameter of a known kind needs nothing here.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from ctxsim.pipeline import jsontext
from ctxsim.pipeline.eras import Era, session_era
from ctxsim.pipeline.export_agents import toml_lines
from ctxsim.pipeline.params import (
    PARAMS,
    ParamError,
    ParamSpec,
    ascii_index,
    env_field,
    env_var_of,
)
from ctxsim.pipeline.profiles import (
    DEFAULT_PROFILE,
    PROFILES,
    Profile,
    RunConfig,
    default_profile_for,
    resolve,
)
from ctxsim.pipeline.registry import PHASES, STAGES, params_of
from ctxsim.pipeline.runkey import run_key
from ctxsim.replays.models import SavedProfile

Pairs = list[tuple[str, str]]
Errors = dict[str, str]


@dataclass(frozen=True)
class ReplaySettings:
    """What decides a replay: a profile (built-in or saved), an optional stage list, overrides.

    Resolved once: `run_config()` and `key` are computed on first use and kept. `era` is the
    release of the session's agent whose values fill in under a built-in agent profile
    (`ctxsim.pipeline.eras`), so the form shows them and an override of one is recorded."""

    profile_ref: str = DEFAULT_PROFILE
    profile: Profile = field(default_factory=lambda: PROFILES[DEFAULT_PROFILE])
    stages: tuple[tuple[str, str], ...] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    saved: SavedProfile | None = None
    era: Era | None = None

    @cached_property
    def _resolved(self) -> RunConfig:
        return resolve(self.profile, self.config, self.stages, era=self.era)

    def run_config(self) -> RunConfig:
        """The resolved settings (ParamError on bad values, as `resolve`)."""
        return self._resolved

    @cached_property
    def key(self) -> str:
        """The run key (`ctxsim.pipeline.runkey`): equal for settings that replay alike."""
        return run_key(self._resolved)

    @property
    def counter(self) -> str:
        return self._resolved.values["counter"]

    @property
    def effective_stages(self) -> tuple[tuple[str, str], ...]:
        return self.stages if self.stages is not None else self.profile.stages

    def with_config(self, config: Mapping[str, Any]) -> ReplaySettings:
        return replace(self, config=dict(config))

    def fields(self, call: int | None = None, *, overrides_only: bool = False) -> Pairs:
        """The view state as (name, value) pairs, the one serializer behind every link and
        hidden field of the page (only what differs from the profile): profile, stages, the
        overrides by name, then the call. `overrides_only` leaves out profile and stages, for
        a form that has its own."""
        params: Pairs = [] if overrides_only else [("profile", self.profile_ref)]
        if self.stages is not None and not overrides_only:
            params.append(("stages", ",".join(f"{s}:{p}" for s, p in self.stages)))
        for name, value in sorted(self.config.items()):
            params.extend(codec_of(PARAMS[name]).encode(name, value))
        if call is not None:
            params.append(("call", str(call)))
        return params

    def query(self, call: int | None = None) -> str:
        """The canonical URL query for this state (`fields` URL-encoded)."""
        return urlencode(self.fields(call))


# --- one codec per parameter kind -------------------------------------------------------------


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


# --- parsing the form / URL ------------------------------------------------------------------


def _stages_from_query(query: Mapping[str, Any], profile: Profile, errors: Errors):
    """The stage list: the form's rows (enable, phase, position), or the `stages` URL text."""
    if "stages.form" in query:
        rows = []
        for name, definition in STAGES.items():
            if query.get(f"stage.{name}") != "on":
                continue
            phase = query.get(f"phase.{name}") or definition.phases[0]
            position = query.get(f"order.{name}") or "0"
            try:
                order = float(position)
            except ValueError:
                errors[f"order.{name}"] = f"{position!r} is not a number"
                order = 0.0
            rank = PHASES.index(phase) if phase in PHASES else 0
            rows.append((rank, order, name, phase))
        entries = tuple((name, phase) for _, _, name, phase in sorted(rows))
    elif query.get("stages") is not None:
        text = query.get("stages") or ""
        entries = tuple(tuple(part.split(":", 1)) for part in split_list(text))
        if any(len(e) != 2 for e in entries):
            errors["stages"] = "write stages as stage:phase, separated by commas"
            return None
    else:
        return None
    return None if entries == profile.stages else entries


def _profile_from_query(ref: str, team, errors: Errors):
    """(ref, profile, saved profile) named by `ref`; the default profile when it names none."""
    from ctxsim.replays.profiles import saved_profile_as_profile

    if ref.startswith("saved:"):
        pk = ref[6:]
        number = ascii_index(pk)
        saved = SavedProfile.objects.filter(team=team, pk=number).first() if number else None
        if saved is not None:
            return ref, saved_profile_as_profile(saved), saved
        errors["profile"] = "no such saved profile in this team"
    elif ref in PROFILES:
        return ref, PROFILES[ref], None
    else:
        errors["profile"] = f"unknown profile {ref!r}"
    return DEFAULT_PROFILE, PROFILES[DEFAULT_PROFILE], None


def era_of(profile: Profile, session: Any) -> Era | None:
    """The era a built-in agent profile takes on this stored session (None for a saved
    profile, another agent's profile, or no session)."""
    if session is None or PROFILES.get(profile.name) is not profile:
        return None
    return session_era(profile.name, session.format, session.meta)


def settings_from_query(query: Mapping[str, Any], team, default: str = DEFAULT_PROFILE, *,
                        session: Any = None) -> tuple[ReplaySettings, Errors]:
    """Parse the page state; returns settings (bad fields fall back to the profile's values)
    and a message per bad field. `default` is the profile when the query names none (a
    session's own agent's, `profiles.default_profile_for`); with the stored `session`, a
    built-in agent profile takes the era of the release that wrote it (`era_of`)."""
    errors: Errors = {}
    ref, profile, saved = _profile_from_query(query.get("profile") or default, team, errors)
    era = era_of(profile, session)
    stages = _stages_from_query(query, profile, errors)
    try:
        base = resolve(profile, {}, stages, era=era)
    except ParamError as exc:
        errors.update(exc.errors)
        stages = None
        base = resolve(profile, era=era)
    config: dict[str, Any] = {}
    for name in sorted(params_of(base.stages) | {"counter"}):
        present, value = codec_of(PARAMS[name]).decode(name, query, errors)
        if present and name not in errors and normal(value) != normal(base.values.get(name)):
            config[name] = value
    resolved = None
    try:
        resolved = resolve(profile, config, stages, era=era)
    except ParamError as exc:
        errors.update(exc.errors)
        config = {k: v for k, v in config.items() if k not in exc.errors}
    settings = ReplaySettings(ref, profile, stages, config, saved, era)
    if resolved is not None:
        settings.__dict__["_resolved"] = resolved  # what `run_config()` would compute again
    return settings, errors


def session_settings(query: Mapping[str, Any], session: Any) -> tuple[ReplaySettings, Errors]:
    """`query` parsed as a page of the stored `session` parses it: the session's own agent's
    profile when it names none, and that agent's era (`era_of`). A job made for the page (a
    background replay, a trace, a deep call) parses its query again like this, so it finds
    the same settings key."""
    return settings_from_query(query, session.team, default_profile_for(session.format),
                               session=session)


def normal(value: Any) -> Any:
    """A value as JSON makes it (tuples become lists, keys sorted), for comparing values."""
    return json.loads(json.dumps(value, default=list, sort_keys=True))
