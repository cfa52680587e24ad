"""Team profiles: saved from the page's settings, imported from a tool's configuration, exported
as each real tool's own configuration (SPEC §4). Saving and importing record their activity line
on the session they were made from."""

from __future__ import annotations

import json

from ctxsim.pipeline.params import PARAMS, ParamError
from ctxsim.pipeline.profiles import DEFAULT_PROFILE, PROFILES, Profile
from ctxsim.pipeline.registry import FAMILIES, family_params, params_of
from ctxsim.replays.models import SavedProfile
from ctxsim.replays.state import ReplaySettings, normal
from ctxsim.reviews import services as reviews

IMPORT_BASES = {"chatcli": "chatcli", "aivax": "aivax", "anthropic": "anthropic-clear-tool-uses",
                "claude-code": "claude-code", "codex": "codex", "openhands": "openhands"}


class ProfileError(ParamError):
    """Bad profile settings (a name, a pasted configuration): one message per form field."""


def saved_profile_as_profile(saved: SavedProfile) -> Profile:
    base = PROFILES.get(saved.base, PROFILES[DEFAULT_PROFILE])
    params = {**base.params, **(saved.params or {})}
    # Profiles saved before an empty optional field meant "not set" may hold "" for it, and
    # the env fields' form marker as a variable.
    params = {k: v for k, v in params.items()
              if not (v == "" and k in PARAMS and PARAMS[k].kind == "optional-string")}
    if isinstance(params.get("env"), dict) and "present" in params["env"]:
        params["env"] = {k: v for k, v in params["env"].items() if k != "present"}
    stages = tuple(tuple(e) for e in saved.stages)
    # The base's [X] values stay marked while the saved profile keeps them.
    undocumented = {k: v for k, v in base.undocumented.items()
                    if normal(params.get(k)) == normal(base.params.get(k))}
    return Profile(saved.name, saved.description, stages, params, undocumented)


def profile_choices(team) -> list[tuple[str, str]]:
    built_in = [(name, name) for name in PROFILES]
    saved = [(p.ref, f"{p.name} (team)") for p in SavedProfile.objects.filter(team=team)]
    return built_in + saved


def _check_name(team, name: str, description: str) -> dict[str, str]:
    errors = {}
    if not name.strip():
        errors["name"] = "give the profile a name"
    elif len(name) > 80:
        errors["name"] = "80 characters at most"
    elif name.strip() in PROFILES:
        errors["name"] = "that is the name of a built-in profile"
    elif SavedProfile.objects.filter(team=team, name=name.strip()).exists():
        errors["name"] = "the team already has a profile with this name"
    if len(description) > 2000:
        errors["description"] = "2000 characters at most"
    return errors


def save_profile(session, user, settings: ReplaySettings, name: str, description: str = "",
                 errors: dict[str, str] | None = None) -> SavedProfile:
    """Store the page's current settings as a named profile of the session's team; `errors`
    are the settings' own problems (from `settings_from_query`), which refuse the save too."""
    saved = save_team_profile(session.team, user, settings, name, description, errors)
    reviews.record(session, user, "profile_saved", f"{saved.name} (saved)")
    return saved


def save_team_profile(team, user, settings: ReplaySettings, name: str, description: str = "",
                      errors: dict[str, str] | None = None) -> SavedProfile:
    """`save_profile` for settings no one session was looked at with (a corpus sweep's
    point): the same checks and the same row, without an activity line."""
    if errors:
        raise ProfileError(errors)
    errors = _check_name(team, name, description)
    if errors:
        raise ProfileError(errors)
    base = settings.saved.base if settings.saved else settings.profile.name
    base_profile = PROFILES.get(base, PROFILES[DEFAULT_PROFILE])
    # What the page showed: the era of the session's release too (a saved profile takes no
    # era of its own, so its values are written down).
    era = dict(settings.era.params) if settings.era else {}
    params = {**era, **settings.profile.params, **settings.config}
    params = {k: v for k, v in params.items()
              if normal(v) != normal(base_profile.params.get(k, PARAMS[k].default))}
    return SavedProfile.objects.create(
        team=team, name=name.strip(), description=description.strip(),
        base=base_profile.name, stages=[list(e) for e in settings.effective_stages],
        params=normal(params), created_by=user,
    )


def import_profile(session, user, tool: str, text: str, name: str,
                   description: str = "") -> SavedProfile:
    """A profile of the session's team from a tool's own configuration pasted as text."""
    from ctxsim.pipeline.export import IMPORTERS

    errors = _check_name(session.team, name, description)
    if tool not in IMPORTERS:
        errors["format"] = f"choose one of {', '.join(IMPORTERS)}"
    if not text.strip():
        errors["text"] = "paste the configuration to import"
    if errors:
        raise ProfileError(errors)
    try:
        values = IMPORTERS[tool](text)
    except ParamError as exc:
        raise ProfileError({f"text ({k})": v for k, v in exc.errors.items()}) from None
    base = PROFILES[IMPORT_BASES[tool]]
    stages = base.stages
    if tool == "anthropic" and ("compact_trigger" in values or "thinking_keep" in values):
        # A request fragment with the SPEC-agents edits: exactly the stages it configures.
        from ctxsim.pipeline.export_agents import anthropic_stages

        base, stages = PROFILES["anthropic-context-management"], anthropic_stages(values)
    saved = SavedProfile.objects.create(
        team=session.team, name=name.strip(), description=description.strip(),
        base=base.name, stages=[list(e) for e in stages],
        params=normal({**base.params, **values}), created_by=user,
    )
    reviews.record(session, user, "profile_saved", f"{saved.name} (imported)")
    return saved


def import_notes(tool: str, text: str) -> list[str]:
    """What a successful import of `text` as `tool` read past and dropped (keys of the tool's
    file ctxsim does not simulate), for the page to say."""
    from ctxsim.pipeline.export import IMPORT_NOTES

    notes = IMPORT_NOTES.get(tool)
    return notes(text) if notes else []


def export_defaults(settings: ReplaySettings, export) -> list[str]:
    """The parameters of `export`'s tool this replay runs on ctxsim's own [X] defaults
    (SPEC-agents §2.5.0.1), with their values: the export page marks them."""
    rc = settings.run_config()
    used = params_of(rc.stages)
    out = []
    for name in family_params(export.tool) if export.tool in FAMILIES else ():
        note = settings.profile.default_note(name) if name in used else ""
        if note:
            value = json.dumps(normal(rc.values.get(name)), ensure_ascii=False)
            out.append(f"{PARAMS[name].label} ({name}) = {value} — {note}")
    return out


def exports_for(settings: ReplaySettings):
    """The settings as each real tool's configuration (viewing them records nothing)."""
    from ctxsim.pipeline.export import export_profile

    return export_profile(settings.run_config())
