"""The user's teams and team switching. Views parse, call the access helpers, and render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from ctxsim.teams.access import get_team_for_user, memberships_for
from ctxsim.teams.current import switch_team


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
