"""The walking skeleton: login everywhere, CSRF on every POST (htmx included), safe settings."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.test import Client
from django.urls import reverse

from tests.shared import ROOT

pytestmark = pytest.mark.django_db


def test_anonymous_users_are_sent_to_the_login_page(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))
    login_page = client.get(response["Location"])
    assert login_page.status_code == 200
    assert b'name="password"' in login_page.content


def test_the_login_form_logs_a_member_in(personas):
    client = Client()
    response = client.post(
        reverse("login"), {"username": "owner", "password": "owner-pass-123"}, follow=True
    )
    assert response.status_code == 200
    assert response.wsgi_request.user.username == "owner"
    assert b"Alpha" in response.content


def test_a_wrong_password_is_refused_with_a_message(personas):
    response = Client().post(reverse("login"), {"username": "owner", "password": "nope"})
    assert response.status_code == 200
    assert b"didn't match" in response.content


def _csrf_token_from(html: str) -> str:
    match = re.search(r"hx-headers:inherited='\{\"X-CSRFToken\": \"([^\"]+)\"\}'", html)
    assert match, "the body must carry the CSRF header for htmx 4"
    return match.group(1)


def test_a_post_without_csrf_token_is_refused(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.users["owner"])
    response = client.post(reverse("team-switch", args=["alpha"]))
    assert response.status_code == 403


def test_an_htmx_post_with_the_token_from_the_page_succeeds(personas):
    from ctxsim.teams.models import Membership, Role

    owner = personas.users["owner"]
    Membership.objects.create(team=personas.other_team, user=owner, role=Role.VIEWER)
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.users["owner"])
    token = _csrf_token_from(client.get("/").content.decode())
    response = client.post(
        reverse("team-switch", args=["beta"]), headers={"X-CSRFToken": token, "HX-Request": "true"}
    )
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/"
    assert client.session["ctxsim_team_id"] == personas.other_team.pk


def test_switching_to_a_team_you_are_not_in_is_a_404(personas):
    client = personas.client("owner")
    assert client.post(reverse("team-switch", args=["beta"])).status_code == 404


def test_pages_carry_a_csp_with_a_script_nonce(personas):
    response = personas.client("owner").get("/")
    policy = response["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
    assert f'nonce="{nonce}"' in response.content.decode()
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]


def _start_django(extra_env: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_debug_off_without_secret_key_refuses_to_start():
    result = _start_django({"DEBUG": "false"})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_a_bad_database_url_fails_at_start_with_its_name():
    result = _start_django({"DATABASE_URL": "nonsense://"})
    assert result.returncode != 0
    assert "DATABASE_URL" in result.stderr


def test_a_bad_boolean_fails_at_start_with_its_name():
    result = _start_django({"DEBUG": "maybe"})
    assert result.returncode != 0
    assert "DEBUG" in result.stderr


def test_the_bootstrap_command_creates_the_first_user_once(monkeypatch):
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    monkeypatch.setenv("CTXSIM_ADMIN_PASSWORD", "correct-horse-battery")
    from io import StringIO

    out = StringIO()
    call_command("bootstrap", stdout=out)
    assert "correct-horse-battery" in out.getvalue()
    user = get_user_model().objects.get()
    assert user.check_password("correct-horse-battery")
    assert user.memberships.get().role == "owner"
    again = StringIO()
    call_command("bootstrap", stdout=again)
    assert "correct-horse-battery" not in again.getvalue()
    assert get_user_model().objects.count() == 1
