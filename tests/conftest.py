"""Shared fixtures: the five personas every web and browser test speaks in.

owner, reviewer and viewer belong to team "alpha"; outsider owns another team "beta";
anonymous is the logged-out client. Passwords are the persona's name + "-pass-123".

Hypothesis runs without its timing rules (per-example deadline, too-slow health check): no
test may pass or fail by the speed of the machine; speed is `make bench`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings

from tests.factories import password_for, spilling_session

settings.register_profile(
    "ctxsim", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ctxsim")

@dataclass
class Personas:
    team: object
    other_team: object
    users: dict

    def client(self, name: str):
        from django.test import Client

        client = Client()
        if name != "anonymous":
            client.force_login(self.users[name])
        return client


@pytest.fixture
def personas(db) -> Personas:
    from django.contrib.auth import get_user_model

    from ctxsim.teams.models import Membership, Role, Team

    User = get_user_model()
    team = Team.objects.create(name="Alpha", slug="alpha")
    other = Team.objects.create(name="Beta", slug="beta")
    users = {}
    for name, role, member_of in (
        ("owner", Role.OWNER, team),
        ("reviewer", Role.REVIEWER, team),
        ("viewer", Role.VIEWER, team),
        ("outsider", Role.OWNER, other),
    ):
        user = User.objects.create_user(username=name, password=password_for(name))
        Membership.objects.create(team=member_of, user=user, role=role)
        users[name] = user
    return Personas(team=team, other_team=other, users=users)


@pytest.fixture
def stored(personas):
    """A small session in team alpha, uploaded by the owner, whose tool result spills."""
    from ctxsim.transcripts.store import save_sessions

    return save_sessions([spilling_session()], team=personas.team, user=personas.users["owner"])[0]
