"""The user's teams, team switching, members and invites. Views parse, call the access
helpers and `services`, and render; membership pages are for the team's owners only."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import UserCreationForm
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import (
    require_GET,
    require_http_methods,
    require_POST,
    require_safe,
)
from django_htmx.http import HttpResponseClientRedirect

from ctxsim.teams import services
from ctxsim.teams.access import get_scoped, get_team_for_user, memberships_for
from ctxsim.teams.current import switch_team
from ctxsim.teams.models import Invite, Membership, Role


@require_safe
def team_list(request: HttpRequest) -> HttpResponse:
    return render(request, "teams/team_list.html", {"memberships": memberships_for(request.user)})


@require_POST
def switch(request: HttpRequest, slug: str) -> HttpResponse:
    _, membership = get_team_for_user(request.user, slug)
    switch_team(request, membership)
    target = request.POST.get("next") or "home"
    if not str(target).startswith("/") or str(target).startswith("//"):
        target = "home"
    if request.htmx:
        return HttpResponseClientRedirect(target if target != "home" else "/")
    return redirect(target)


# --- members and invites (owners) ----------------------------------------------------------


@require_GET
def members(request: HttpRequest, slug: str) -> HttpResponse:
    team, membership = get_team_for_user(request.user, slug, "manage")
    invites = [
        {"invite": i, "url": request.build_absolute_uri(reverse("invite-accept", args=[i.token]))}
        for i in services.pending_invites(team)
    ]
    return render(request, "teams/members.html", {
        "team": team, "membership": membership, "invites": invites, "roles": Role.choices,
        "memberships": team.memberships.select_related("user").order_by("user__username"),
        "invite_days": settings.CTXSIM_INVITE_DAYS,
    })


def _member(request: HttpRequest, slug: str, membership_id: int) -> Membership:
    member, _ = get_scoped(Membership.objects.select_related("user", "team"), request.user,
                           "manage", pk=membership_id, team__slug=slug)
    return member


def _back(slug: str) -> HttpResponse:
    return redirect("team-members", slug=slug)


@require_POST
def member_add(request: HttpRequest, slug: str) -> HttpResponse:
    team, _ = get_team_for_user(request.user, slug, "manage")
    try:
        added = services.add_member(team, request.POST.get("username", ""),
                                    request.POST.get("role", Role.VIEWER))
    except services.MemberError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{added.user.get_username()} joined {team} as "
                                  f"{added.get_role_display().lower()}.")
    return _back(slug)


@require_POST
def member_role(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    member = _member(request, slug, membership_id)
    try:
        services.change_role(member, request.POST.get("role", ""))
    except services.MemberError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{member.user.get_username()} is now "
                                  f"{member.get_role_display().lower()}.")
    if member.user_id == request.user.pk and not member.can_manage:
        return redirect("team-list")  # an owner who stepped down can no longer see this page
    return _back(slug)


@require_POST
def member_remove(request: HttpRequest, slug: str, membership_id: int) -> HttpResponse:
    member = _member(request, slug, membership_id)
    try:
        services.remove_member(member)
    except services.MemberError as exc:
        messages.error(request, str(exc))
        return _back(slug)
    messages.success(request, f"{member.user.get_username()} left {member.team}.")
    if member.user_id == request.user.pk:
        return redirect("team-list")
    return _back(slug)


@require_POST
def invite_create(request: HttpRequest, slug: str) -> HttpResponse:
    team, _ = get_team_for_user(request.user, slug, "manage")
    try:
        invite = services.create_invite(team, request.user, request.POST.get("role", Role.VIEWER))
    except services.MemberError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Invite link created ({invite.get_role_display().lower()}); "
                                  "copy it from the list below. It works once.")
    return _back(slug)


@require_POST
def invite_revoke(request: HttpRequest, slug: str, invite_id: int) -> HttpResponse:
    invite, _ = get_scoped(Invite.objects.all(), request.user, "manage", pk=invite_id,
                           team__slug=slug)
    invite.delete()
    messages.success(request, "Invite link revoked.")
    return _back(slug)


@login_not_required
@require_http_methods(["GET", "POST"])
def invite_accept(request: HttpRequest, token: str) -> HttpResponse:
    """The one page open to anonymous visitors besides login: a new user picks a username and
    password and joins; a logged-in user joins with one click."""
    invite = services.usable_invite(token)
    if invite is None:
        return render(request, "teams/invite.html", {"invite": None}, status=404)
    form = None
    if not request.user.is_authenticated:
        form = UserCreationForm(request.POST or None)
    if request.method == "POST" and (form is None or form.is_valid()):
        try:
            with transaction.atomic():
                user = form.save() if form is not None else request.user
                membership = services.accept_invite(token, user)
        except services.MemberError as exc:
            messages.error(request, str(exc))
            return redirect("login")
        if form is not None:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        switch_team(request, membership)
        messages.success(request, f"Welcome to {membership.team}: you are "
                                  f"{membership.get_role_display().lower()}.")
        return redirect("home")
    already = (request.user.is_authenticated
               and invite.team.memberships.filter(user=request.user).exists())
    return render(request, "teams/invite.html", {"invite": invite, "form": form,
                                                 "already": already})
