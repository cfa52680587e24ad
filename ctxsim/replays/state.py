"""What decides a replay, and how it travels in a URL or a form.

The session page's state (profile, stage list, parameter values, selected call) lives in the
URL. `settings_from_query` turns a query (GET or POST) into a frozen `ReplaySettings`,
reporting bad values per field; `ReplaySettings.query` writes the canonical query back. Each
parameter kind has one `Codec` (`ctxsim.replays.codecs`: its URL/form fields, its parsing, its
form text), so a new parameter of a known kind needs nothing here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any
from urllib.parse import urlencode

from ctxsim.pipeline.eras import Era, session_era
from ctxsim.pipeline.params import (
    PARAMS,
    ParamError,
    ascii_index,
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
from ctxsim.replays.codecs import Errors, Pairs, codec_of, split_list
from ctxsim.replays.models import SavedProfile


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
