"""Creating, checking and revoking API tokens. A token is `ctx_` + 40 random URL-safe
characters; only its SHA-256 is stored, so a database dump cannot be used to call the API."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from datetime import timedelta

from django.utils import timezone

from ctxsim.api.models import ApiToken, Scope
from ctxsim.teams.models import Team

TOKEN_PREFIX = "ctx_"
# `last_used_at` is written at most this often per token, so a busy hook is not a write each.
LAST_USE_RESOLUTION = timedelta(minutes=1)


class TokenError(ValueError):
    """A token that cannot be created as asked; the message is for the user."""


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def parse_scopes(value: str | Iterable[str]) -> list[str]:
    """Scopes from "ingest,read" or a list; at least one, each known, in a fixed order."""
    items = value.split(",") if isinstance(value, str) else list(value)
    wanted = {item.strip() for item in items if item and item.strip()}
    unknown = sorted(wanted - set(Scope.values))
    if unknown:
        raise TokenError(
            f"unknown scope {', '.join(unknown)}; use ingest, read or ingest,read"
        )
    if not wanted:
        raise TokenError("choose at least one scope (ingest, read)")
    return [scope for scope in Scope.values if scope in wanted]


def create_token(team: Team, name: str, scopes, *, user=None) -> tuple[ApiToken, str]:
    """A new token for the team; returns the row and the token, which is never shown again."""
    name = (name or "").strip()
    if not name:
        raise TokenError("give the token a name (e.g. the machine or hook it is for)")
    if len(name) > 100:
        raise TokenError("the name is longer than 100 characters")
    scope_list = parse_scopes(scopes)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    token = ApiToken.objects.create(
        team=team,
        name=name,
        scopes=",".join(scope_list),
        token_hash=hash_token(raw),
        prefix=raw[:10],
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    return token, raw


def authenticate(raw: str | None) -> ApiToken | None:
    """The active token with this value, its last use recorded; None for a bad or revoked one."""
    if not raw or len(raw) > 200:
        return None
    token = (
        ApiToken.objects.select_related("team", "created_by")
        .filter(token_hash=hash_token(raw), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USE_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def revoke(token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def team_tokens(team: Team):
    return ApiToken.objects.filter(team=team).select_related("created_by")
