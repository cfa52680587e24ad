"""Issue 20 item 21, issue 28 item 8: repeated wrong passwords lock the login out, per
username and address together, and per address alone at a higher limit — never per username
alone (anyone could lock any user out)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def attempt(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(
        reverse("login"), {"username": username, "password": password})


def test_wrong_passwords_lock_that_address_out_even_with_the_right_one(personas):
    """issue 20 item 21: 60 wrong passwords, then the right one, logged in."""
    limit = settings.CTXSIM_LOGIN_FAILURE_LIMIT
    for n in range(limit - 1):
        assert attempt("owner", f"guess-{n}", "10.0.1.1").status_code == 200
    assert attempt("owner", "one guess too many", "10.0.1.1").status_code == 429
    locked = attempt("owner", "owner-pass-123", "10.0.1.1")
    assert locked.status_code == 429
    body = locked.content.decode()
    assert "Too many failed logins" in body and "minutes" in body
    assert "_auth_user_id" not in locked.wsgi_request.session


def test_wrong_passwords_from_elsewhere_never_lock_the_real_user_out(personas):
    """issue 28 item 8: five wrong passwords from one address locked the real user out at
    another for 15 minutes (axes locked on the username alone)."""
    for n in range(settings.CTXSIM_LOGIN_FAILURE_LIMIT * 2):
        attempt("owner", f"guess-{n}", "10.0.5.1")
    assert attempt("owner", "owner-pass-123", "10.0.5.1").status_code == 429
    assert attempt("owner", "owner-pass-123", "10.0.5.2").status_code == 302


def test_one_address_trying_many_users_is_locked_out_at_the_higher_limit(personas):
    """issue 20 item 21: the lockout is per address too (password spraying), at
    CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT: one wrong password for each of many users."""
    per_address = settings.CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT
    assert per_address > settings.CTXSIM_LOGIN_FAILURE_LIMIT
    for n in range(per_address - 1):
        # Below the address's limit each new username is refused as a wrong password only.
        assert attempt(f"someone{n}", "password1", "10.0.3.1").status_code == 200
    assert attempt("someone-last", "password1", "10.0.3.1").status_code == 429
    # At it, nobody logs in from that address.
    assert attempt("viewer", "viewer-pass-123", "10.0.3.1").status_code == 429
    # Another address is not affected.
    assert attempt("viewer", "viewer-pass-123", "10.0.3.2").status_code == 302


def test_a_few_mistakes_then_success_still_logs_in(personas):
    """issue 20 item 21: the limit is not reached by an ordinary typo or two."""
    for n in range(settings.CTXSIM_LOGIN_FAILURE_LIMIT - 1):
        attempt("reviewer", f"typo-{n}", "10.0.4.1")
    assert attempt("reviewer", "reviewer-pass-123", "10.0.4.1").status_code == 302


def test_the_limits_come_from_the_environment(tmp_path):
    """issue 20 item 21: failure limits and cool-off are settings like every other."""
    from datetime import timedelta

    from tests.web.test_production import SETUP, run_python

    assert settings.CTXSIM_LOGIN_FAILURE_LIMIT >= 3
    assert timedelta(minutes=1) <= settings.AXES_COOLOFF_TIME
    assert settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"], "ip_address"]
    result = run_python(SETUP + "print(settings.CTXSIM_LOGIN_FAILURE_LIMIT, "
                        "settings.CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT)", tmp_path,
                        CTXSIM_LOGIN_FAILURE_LIMIT="3", CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT="9")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["3", "9"]


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
