"""Team membership changes: adding members, roles, removals and invite links.

A team always keeps at least one owner: the checks that enforce it lock the team row, so two
owners demoting each other at the same moment cannot both succeed.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from ctxsim.teams.models import Invite, Membership, Role, Team


class MemberError(ValueError):
    """A membership change refused for a reason the owner can act on."""


def _role(value: str) -> str:
    if value not in Role.values:
        raise MemberError("Choose a role: owner, reviewer or viewer.")
    return value


def _lock_team(team_id: int) -> Team:
    return Team.objects.select_for_update().get(pk=team_id)


def _other_owners(membership: Membership) -> bool:
    return (
        Membership.objects.filter(team_id=membership.team_id, role=Role.OWNER)
        .exclude(pk=membership.pk)
        .exists()
    )


def add_member(team: Team, username: str, role: str) -> Membership:
    """Add an existing user by username (case-insensitive, as people type it)."""
    role = _role(role)
    name = (username or "").strip()
    if not name:
        raise MemberError("Type the username of the person to add.")
    user = get_user_model().objects.filter(username__iexact=name, is_active=True).first()
    if user is None:
        raise MemberError(f"No user is called “{name}”. Create an invite link for them instead.")
    try:
        with transaction.atomic():
            return Membership.objects.create(team=team, user=user, role=role)
    except IntegrityError:
        raise MemberError(f"{user.get_username()} is already a member of {team}.") from None


def change_role(membership: Membership, role: str) -> None:
    role = _role(role)
    with transaction.atomic():
        _lock_team(membership.team_id)
        if membership.role == Role.OWNER and role != Role.OWNER and not _other_owners(membership):
            raise MemberError("A team needs an owner: make someone else owner first.")
        Membership.objects.filter(pk=membership.pk).update(role=role)
    membership.role = role


def remove_member(membership: Membership) -> None:
    with transaction.atomic():
        _lock_team(membership.team_id)
        if membership.role == Role.OWNER and not _other_owners(membership):
            raise MemberError("A team needs an owner: make someone else owner first.")
        membership.delete()


def create_invite(team: Team, created_by, role: str) -> Invite:
    expires = timezone.now() + timedelta(days=settings.CTXSIM_INVITE_DAYS)
    return Invite.objects.create(team=team, created_by=created_by, role=_role(role),
                                 expires_at=expires)


def pending_invites(team: Team):
    return Invite.objects.filter(team=team, used_at__isnull=True, expires_at__gt=timezone.now())


def usable_invite(token: str) -> Invite | None:
    """The invite for this token if it can still be accepted; None for unknown, spent or
    expired ones (they are indistinguishable to the visitor)."""
    invite = Invite.objects.select_related("team").filter(token=token).first()
    return invite if invite is not None and invite.is_usable else None


def accept_invite(token: str, user) -> Membership:
    """Spend the invite on `user`. Must run inside the caller's transaction when the user was
    just created, so a lost race for a single-use invite leaves no account behind."""
    with transaction.atomic():
        invite = Invite.objects.select_for_update().filter(token=token).first()
        if invite is None or not invite.is_usable:
            raise MemberError("This invite link has been used or has expired.")
        membership = Membership.objects.filter(team_id=invite.team_id, user=user).first()
        if membership is not None:
            # Already in the team: keep the link for whoever it was meant for.
            return membership
        membership = Membership.objects.create(team_id=invite.team_id, user=user,
                                               role=invite.role)
        invite.used_at, invite.used_by = timezone.now(), user
        invite.save(update_fields=["used_at", "used_by"])
    return membership
