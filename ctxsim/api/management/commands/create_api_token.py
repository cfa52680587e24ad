"""`manage.py create_api_token --team SLUG --name N [--scope ingest,read]`: a new API token for
automation, printed once on stdout (only its hash is stored)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ctxsim.api import tokens
from ctxsim.teams.models import Team


class Command(BaseCommand):
    help = "Create an API token for a team and print it (it is never shown again)."

    def add_arguments(self, parser):
        parser.add_argument("--team", required=True, help="the team's slug")
        parser.add_argument("--name", required=True, help="what the token is for")
        parser.add_argument("--scope", default="ingest",
                            help="ingest, read or ingest,read (default: ingest)")

    def handle(self, *args, team: str, name: str, scope: str, **options):
        found = Team.objects.filter(slug=team).first()
        if found is None:
            raise CommandError(f"no team with the slug {team!r}")
        try:
            token, raw = tokens.create_token(found, name, scope)
        except tokens.TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"token {token.name!r} ({token.scopes}) for team {found.slug}; "
                          "copy it now, it is not shown again:")
        self.stdout.write(raw)
