"""Login throttling (django-axes): who a login attempt comes from, and the locked-out page.

Failures are counted per username and per client address (settings `AXES_*`, from
`CTXSIM_LOGIN_FAILURE_LIMIT` and `CTXSIM_LOGIN_COOLOFF_MINUTES`); either reaching the limit
locks logins for the cool-off time, even with the right password.
"""

from __future__ import annotations

from django.conf import settings
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
