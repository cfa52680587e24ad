"""The team page's API tokens and redaction setting (owners only). Parse → service → render."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from ctxsim.api import tokens
from ctxsim.api.models import ApiToken
from ctxsim.teams.access import get_scoped, get_team_for_user


def _back(slug: str, anchor: str) -> HttpResponse:
    response = redirect("team-members", slug=slug)
    response["Location"] += f"#{anchor}"
    return response


@never_cache  # the page holds the new token: no cache may keep it
@require_POST
def token_create(request: HttpRequest, slug: str) -> HttpResponse:
    team, _ = get_team_for_user(request.user, slug, "manage")
    try:
        token, raw = tokens.create_token(
            team, request.POST.get("name", ""), request.POST.getlist("scopes"), user=request.user
        )
    except tokens.TokenError as exc:
        messages.error(request, str(exc))
        return _back(slug, "api-tokens")
    return render(request, "api/token_created.html", {"team": team, "token": token, "raw": raw})


@require_POST
def token_revoke(request: HttpRequest, slug: str, token_id: int) -> HttpResponse:
    token, _ = get_scoped(ApiToken.objects.all(), request.user, "manage", pk=token_id,
                          team__slug=slug)
    tokens.revoke(token)
    messages.success(request, f"API token “{token.name}” revoked.")
    return _back(slug, "api-tokens")


@require_POST
def redaction(request: HttpRequest, slug: str) -> HttpResponse:
    team, _ = get_team_for_user(request.user, slug, "manage")
    team.redact_secrets = request.POST.get("redact_secrets") == "on"
    team.save(update_fields=["redact_secrets"])
    state = "on" if team.redact_secrets else "off"
    messages.success(request, f"Redacting secrets on import is {state}.")
    return _back(slug, "redaction")
