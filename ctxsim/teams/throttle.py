"""Login throttling (django-axes): who a login attempt comes from, and the locked-out page.

Failures are counted per username and client address together (`CTXSIM_LOGIN_FAILURE_LIMIT`)
and per client address alone (`CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT`, higher: one address
spraying passwords over many users); either reaching its limit locks logins from that address
(for that username, or for all) for `CTXSIM_LOGIN_COOLOFF_MINUTES`, even with the right
password. Never per username alone: five wrong passwords from anywhere locked the real user
out at their own address (issue 28 item 8).

django-axes compares one count with one limit: with `AXES_LOCKOUT_PARAMETERS` of
(username, address) and (address), the count it takes is the larger, the address's.
`failure_limit` (its `AXES_FAILURE_LIMIT`) therefore answers the pair's limit once the pair
reached it, and the address's limit otherwise.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_ip(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or, behind `CTXSIM_TRUSTED_PROXIES` proxies, the
    address the outermost of them saw (each appends one entry to X-Forwarded-For). Entries a
    client wrote itself sit further left and are never read."""
    proxies = settings.CTXSIM_TRUSTED_PROXIES
    remote = request.META.get("REMOTE_ADDR", "") or ""
    if proxies <= 0:
        return remote
    forwarded = [part.strip() for part in
                 request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
    return forwarded[-proxies] if len(forwarded) >= proxies else remote


def locked_out(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """The login page's answer while locked: 429 and one sentence saying for how long."""
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    return render(request, "registration/locked_out.html", {"minutes": minutes},
                  status=settings.AXES_HTTP_RESPONSE_CODE)


def failure_limit(request: HttpRequest, credentials: dict | None = None) -> int:
    """The limit django-axes compares this attempt's count (the address's) with."""
    from axes.attempts import get_cool_off_threshold
    from axes.helpers import get_client_username
    from axes.models import AccessAttempt

    pair_limit = settings.CTXSIM_LOGIN_FAILURE_LIMIT
    username = get_client_username(request, credentials)
    address = getattr(request, "axes_ip_address", None)
    if username and address:
        attempts = AccessAttempt.objects.filter(
            username=username, ip_address=address,
            attempt_time__gte=get_cool_off_threshold(request))
        failed = attempts.aggregate(n=Sum("failures_since_start"))["n"] or 0
        if failed >= pair_limit:
            return pair_limit
    return max(settings.CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT, pair_limit)
