"""`python manage.py export_trace SESSION_ID [--profile NAME] [--config PARAMS.json] [--out FILE]
[--summary]` (SPEC §6): the trace of a stored session, as `simulate` prints it for a file.

`--profile` takes a built-in profile name or a team profile as `TEAM-SLUG/NAME`; without it,
the session's own agent's profile (as the session page: `claude-code`, `codex`, `openhands`,
else `chatcli`).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ctxsim.pipeline.params import ParamError
from ctxsim.pipeline.profiles import PROFILES
from ctxsim.replays.models import SavedProfile
from ctxsim.replays.profiles import saved_profile_as_profile
from ctxsim.replays.services import default_settings, trace_json
from ctxsim.replays.state import ReplaySettings
from ctxsim.transcripts.models import Session


class Command(BaseCommand):
    help = "Write the replay trace of a stored session (SPEC §6)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("session_id", type=int, metavar="SESSION_ID")
        parser.add_argument("--profile", metavar="NAME")
        parser.add_argument("--config", metavar="PARAMS.json")
        parser.add_argument("--out", metavar="FILE")
        parser.add_argument("--summary", action="store_true", help="omit the history arrays")

    def handle(self, *args, session_id, profile, config, out, summary, **options) -> None:
        session = Session.objects.filter(pk=session_id).first()
        if session is None:
            raise CommandError(f"no session with id {session_id}", returncode=2)
        overrides = self._config(config)
        if profile is None:
            profile = default_settings(session).profile_ref
        if "/" in profile:
            slug, _, name = profile.partition("/")
            saved = SavedProfile.objects.filter(team__slug=slug, name=name).first()
            if saved is None:
                raise CommandError(f"no profile {name!r} in team {slug!r}", returncode=2)
            chosen = saved_profile_as_profile(saved)
        elif profile in PROFILES:
            chosen = PROFILES[profile]
        else:
            raise CommandError(
                f"unknown profile {profile!r} (known: {', '.join(PROFILES)}, or TEAM/NAME)",
                returncode=2,
            )
        settings = ReplaySettings(profile_ref=profile, profile=chosen, config=overrides)
        try:
            text = trace_json(session, settings, summary=summary)
        except ParamError as error:
            problems = "; ".join(f"config.{k}: {v}" for k, v in error.errors.items())
            raise CommandError(problems, returncode=2) from None
        if out:
            Path(out).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text, ending="")

    def _config(self, path: str | None) -> dict:
        if not path:
            return {}
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            message = f"{path}: cannot read file ({error.strerror})"
            raise CommandError(message, returncode=2) from None
        except (ValueError, UnicodeDecodeError) as error:
            raise CommandError(f"{path}: not valid JSON ({error})", returncode=2) from None
        if not isinstance(data, dict):
            raise CommandError(f"{path}: expected a JSON object of parameters", returncode=2)
        return data
