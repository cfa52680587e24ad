"""First-run setup for `make run`: a first user and team when the database has no user yet.

The generated password is printed once; CTXSIM_ADMIN_PASSWORD (and CTXSIM_ADMIN_USERNAME)
override it. Running it again changes nothing.
"""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from ctxsim.teams.models import Membership, Role, Team


class Command(BaseCommand):
    help = "Create the first user and team if the database has no user yet."

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        if User.objects.exists():
            self.stdout.write("ctxsim: users exist already; log in with your account.")
            return
        username = os.environ.get("CTXSIM_ADMIN_USERNAME", "admin")
        password = os.environ.get("CTXSIM_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        with transaction.atomic():
            user = User.objects.create_superuser(username=username, password=password, email="")
            team, _ = Team.objects.get_or_create(slug="demo", defaults={"name": "Demo team"})
            Membership.objects.get_or_create(team=team, user=user, defaults={"role": Role.OWNER})
        self.stdout.write(self.style.SUCCESS("ctxsim: created the first user (shown only once):"))
        self.stdout.write(f"    login:    {username}")
        self.stdout.write(f"    password: {password}")
        self.stdout.write(f"    team:     {team.name} ({team.slug}), role owner")
