"""Team-scoped access: the one place that decides who may read or change what.

Every view fetches objects through these helpers, never with a bare `Model.objects.get`:
- a user who is not a member of the object's team gets 404 (the object does not exist for them);
- a member whose role does not allow the action gets 403.
Templates never guard data; a partial can be requested directly, so the check lives here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from django.core.exceptions import PermissionDenied
from django.db.models import F, Model, QuerySet
from django.http import Http404

from ctxsim.teams.models import MANAGE_ROLES, WRITE_ROLES, Membership, Team

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    User = AbstractBaseUser | AnonymousUser

Action = Literal["read", "write", "manage"]


def memberships_for(user: User) -> QuerySet[Membership]:
    if not user.is_authenticated:
        return Membership.objects.none()
    return Membership.objects.filter(user=user).select_related("team")


def teams_for_user(user: User) -> QuerySet[Team]:
    if not user.is_authenticated:
        return Team.objects.none()
    return Team.objects.filter(memberships__user=user)


def check_role(membership: Membership, action: Action) -> None:
    """Raise 403 when the member's role does not allow the action."""
    if action == "write" and membership.role not in WRITE_ROLES:
        raise PermissionDenied("Your role in this team is read-only.")
    if action == "manage" and membership.role not in MANAGE_ROLES:
        raise PermissionDenied("Only the team's owners can do this.")


def get_membership(user: User, team: Team | int) -> Membership | None:
    team_id = team.pk if isinstance(team, Team) else team
    return memberships_for(user).filter(team_id=team_id).first()


def get_team_for_user(user: User, slug: str, action: Action = "read") -> tuple[Team, Membership]:
    """The team with this slug and the user's membership; 404 for outsiders, 403 by role."""
    membership = memberships_for(user).filter(team__slug=slug).first()
    if membership is None:
        raise Http404("No such team.")
    check_role(membership, action)
    return membership.team, membership


def get_scoped[M: Model](
    queryset: QuerySet[M],
    user: User,
    action: Action = "read",
    *,
    team_field: str = "team",
    memberships: Sequence[Membership] | None = None,
    **lookup,
) -> tuple[M, Membership]:
    """Fetch one object of a team-owned model, checked like `get_team_for_user`.

    The membership filter is part of the query, so an outsider cannot even learn whether the
    object exists: a missing object and a foreign one both give 404. `memberships` are the
    user's, read already in this request (`current.request_memberships`): the member's role
    is taken from them instead of a second query.
    """
    if not lookup:
        raise ValueError("get_scoped needs a lookup (e.g. pk=...)")
    if not user.is_authenticated:
        raise Http404
    scoped = (
        queryset.filter(**lookup, **{f"{team_field}__memberships__user": user})
        .annotate(_scoped_team_id=F(team_field))
    )
    # By primary key there is one row at most: no ordering to compile (a quarter of the
    # look-up's CPU with the session's ordering).
    obj = next(iter(scoped.order_by()[:1]), None) if "pk" in lookup else scoped.first()
    if obj is None:
        raise Http404
    membership = next((m for m in memberships or () if m.team_id == obj._scoped_team_id), None)
    if membership is None:
        membership = memberships_for(user).get(team_id=obj._scoped_team_id)
    check_role(membership, action)
    return obj, membership
