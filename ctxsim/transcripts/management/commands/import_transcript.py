"""`python manage.py import_transcript FILE... --team SLUG [--user NAME] [--format F]` (SPEC §6).

Each file is imported in its own transaction; one JSON line per session on stdout, one
`FILE: message` line per failed file on stderr, exit status 2 when any file failed.
"""

from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from ctxsim import importers
from ctxsim.importers.errors import TranscriptError
from ctxsim.teams.models import Membership, Role, Team
from ctxsim.transcripts.imports import finish_import, import_transcript, session_line


class Command(BaseCommand):
    help = "Import transcript files into a team (formats are detected by content)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("files", nargs="+", metavar="FILE")
        parser.add_argument("--team", required=True, metavar="SLUG")
        parser.add_argument("--user", metavar="NAME", help="uploader and owner of a new team")
        parser.add_argument("--format", choices=importers.FORMATS, metavar="F")

    def handle(self, *args, files, team, user, format, **options) -> None:
        owner = self._user(user)
        team_row = self._team(team, owner)
        failed = 0
        for path in files:
            try:
                outcome = import_transcript(path, team=team_row, user=owner, format=format)
            except TranscriptError as error:
                failed += 1
                self.stderr.write(f"{path}: {error}")
                if options.get("verbosity", 1) > 1:  # -v 2: the reasons behind the line
                    for detail in error.details:
                        self.stderr.write(f"  {detail}")
                continue
            except OSError as error:
                failed += 1
                self.stderr.write(f"{path}: cannot read the file ({error.strerror or error})")
                continue
            # After the import's transaction: the list's peak tokens come from a replay.
            finish_import(outcome.sessions)
            for row in outcome.sessions:
                line = session_line(row)
                if outcome.warnings:
                    line["warnings"] = outcome.warnings
                self.stdout.write(json.dumps(line, ensure_ascii=False))
        if failed:
            raise SystemExit(2)

    def _user(self, username: str | None):
        User = get_user_model()
        if username:
            try:
                return User.objects.get(username=username)
            except User.DoesNotExist:
                raise CommandError(f"no user named {username!r}", returncode=2) from None
        return User.objects.filter(is_superuser=True).order_by("pk").first()

    def _team(self, slug: str, owner) -> Team:
        team = Team.objects.filter(slug=slug).first()
        if team is not None:
            return team
        if owner is None:
            raise CommandError(
                f"team {slug!r} does not exist and there is no user to own it: "
                "pass --user or create a superuser first",
                returncode=2,
            )
        with transaction.atomic():
            team = Team.objects.create(slug=slug, name=slug.replace("-", " ").title())
            Membership.objects.create(team=team, user=owner, role=Role.OWNER)
        return team
