"""Which team a user is working in: remembered in the session, defaulting to their first team."""

from __future__ import annotations

from django.http import Http404, HttpRequest

from ctxsim.teams.access import Action, check_role, memberships_for
from ctxsim.teams.models import Membership

SESSION_KEY = "ctxsim_team_id"


def request_memberships(request: HttpRequest) -> list[Membership]:
    """The user's memberships with their teams (by team name), read once per request: the
    current team, the team switcher and the team-scoped look-ups of one request share them."""
    cached = getattr(request, "_ctxsim_memberships", None)
    if cached is None:
        cached = request._ctxsim_memberships = list(memberships_for(request.user))
    return cached


def current_membership(request: HttpRequest) -> Membership | None:
    if not hasattr(request, "user") or not request.user.is_authenticated:
        return None
    cached = getattr(request, "_ctxsim_membership", False)
    if cached is not False:
        return cached
    memberships = request_memberships(request)
    team_id = request.session.get(SESSION_KEY)
    chosen = next((m for m in memberships if m.team_id == team_id), None)
    if chosen is None and memberships:  # the team joined first
        chosen = min(memberships, key=lambda m: (m.created_at, m.pk))
    request._ctxsim_membership = chosen
    return chosen


def current_membership_for(request: HttpRequest, action: Action = "read") -> Membership:
    """The member's current team, checked for the action: a user with no team gets 404, a
    read-only member writing 403 (the pages that work in the user's own team)."""
    membership = current_membership(request)
    if membership is None:
        raise Http404("You are not a member of any team.")
    check_role(membership, action)
    return membership


def switch_team(request: HttpRequest, membership: Membership) -> None:
    request.session[SESSION_KEY] = membership.team_id
    request._ctxsim_membership = membership
