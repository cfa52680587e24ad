from __future__ import annotations

import functools

from django.http import HttpRequest

from ctxsim.teams.current import current_membership, request_memberships


def current_team(request: HttpRequest) -> dict:
    """The team the user is working in and their teams, for the navigation bar: read when a
    template shows them (an htmx fragment, most requests, never does)."""
    membership = functools.cache(lambda: current_membership(request))
    return {
        "current_membership": membership,
        "current_team": lambda: membership().team if membership() else None,
        "current_memberships": lambda: (request_memberships(request)
                                        if request.user.is_authenticated else []),
    }
