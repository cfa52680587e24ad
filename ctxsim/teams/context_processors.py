from __future__ import annotations

from django.http import HttpRequest

from ctxsim.teams.current import current_membership


def current_team(request: HttpRequest) -> dict:
    """The team the user is working in, for the navigation bar."""
    membership = current_membership(request)
    return {
        "current_membership": membership,
        "current_team": membership.team if membership else None,
    }
