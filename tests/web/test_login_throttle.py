"""Issue 20 item 21: repeated wrong passwords lock the login out, per user and per address."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def attempt(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(
        reverse("login"), {"username": username, "password": password})


def test_wrong_passwords_lock_the_user_out_even_with_the_right_one(personas):
    """issue 20 item 21: 60 wrong passwords, then the right one, logged in."""
    limit = settings.AXES_FAILURE_LIMIT
    for n in range(limit - 1):
        assert attempt("owner", f"guess-{n}", f"10.0.1.{n}").status_code == 200
    assert attempt("owner", "one guess too many", "10.0.1.99").status_code == 429
    locked = attempt("owner", "owner-pass-123", "10.0.2.1")
    assert locked.status_code == 429
    body = locked.content.decode()
    assert "Too many failed logins" in body and "minutes" in body
    assert "_auth_user_id" not in locked.wsgi_request.session


def test_one_address_trying_many_users_is_locked_out(personas):
    """issue 20 item 21: the lockout is per address too (password spraying)."""
    for n in range(settings.AXES_FAILURE_LIMIT):
        attempt(f"someone{n}", "password1", "10.0.3.1")
    assert attempt("viewer", "viewer-pass-123", "10.0.3.1").status_code == 429
    # Another address and another user are not affected.
    ok = attempt("viewer", "viewer-pass-123", "10.0.3.2")
    assert ok.status_code == 302


def test_a_few_mistakes_then_success_still_logs_in(personas):
    """issue 20 item 21: the limit is not reached by an ordinary typo or two."""
    for n in range(settings.AXES_FAILURE_LIMIT - 1):
        attempt("reviewer", f"typo-{n}", "10.0.4.1")
    assert attempt("reviewer", "reviewer-pass-123", "10.0.4.1").status_code == 302


def test_the_limits_come_from_the_environment():
    """issue 20 item 21: failure limit and cool-off are settings like every other."""
    from datetime import timedelta

    assert settings.AXES_FAILURE_LIMIT >= 3
    assert timedelta(minutes=1) <= settings.AXES_COOLOFF_TIME
    assert settings.AXES_LOCKOUT_PARAMETERS == ["username", "ip_address"]


def test_behind_trusted_proxies_the_address_is_the_one_the_outer_proxy_saw(settings, rf):
    """issue 20 item 21: behind a proxy REMOTE_ADDR is the proxy; a client's own
    X-Forwarded-For entries (left of the proxies') are never believed."""
    from ctxsim.teams.throttle import client_ip

    request = rf.get("/", REMOTE_ADDR="10.9.9.9",
                     HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.7, 10.0.0.2")
    settings.CTXSIM_TRUSTED_PROXIES = 0
    assert client_ip(request) == "10.9.9.9"
    settings.CTXSIM_TRUSTED_PROXIES = 2
    assert client_ip(request) == "203.0.113.7"
    settings.CTXSIM_TRUSTED_PROXIES = 5
    assert client_ip(request) == "10.9.9.9"
