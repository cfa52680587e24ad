"""Issue 20 item 9: request bodies over their limit are refused before anything reads them."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import multipartparser
from django.test import Client, override_settings
from django.urls import reverse

from ctxsim.transcripts.models import ImportJob, Session

pytestmark = pytest.mark.django_db

HUGE = 600 * 1024 * 1024


@pytest.fixture
def no_parsing(monkeypatch):
    """Any attempt to parse a multipart body (what the test client sends) fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the body was parsed")

    monkeypatch.setattr(multipartparser.MultiPartParser, "parse", refuse)


def test_an_anonymous_600_mb_login_post_is_refused_by_its_declared_length(no_parsing):
    """issue 20 item 9: a 600 MB POST to /login/ was spooled to disk before any check."""
    response = Client().post(reverse("login"), {"username": "x", "password": "y"},
                             CONTENT_LENGTH=str(HUGE))
    assert response.status_code == 413
    assert "too large" in response.content.decode()


def test_an_anonymous_body_larger_than_a_login_form_is_refused(personas):
    """issue 20 item 9: anonymous visitors only ever send a login or sign-up form."""
    response = Client().post(reverse("login"), {"username": "x", "password": "y" * 200_000})
    assert response.status_code == 413


def test_an_upload_body_over_the_request_limit_is_refused_before_parsing(personas, no_parsing):
    """issue 20 item 9: the same for a member's upload."""
    client = personas.client("owner")
    response = client.post(reverse("upload"), {"files": [SimpleUploadedFile("a.jsonl", b"{}")]},
                           CONTENT_LENGTH=str(HUGE))
    assert response.status_code == 413
    assert "too large" in response.content.decode()
    assert not ImportJob.objects.exists() and not Session.objects.exists()


@override_settings(CTXSIM_MAX_REQUEST_BYTES=80_000)
def test_the_upload_limit_comes_from_the_settings(personas):
    """issue 20 item 9: CTXSIM_MAX_REQUEST_BYTES bounds a whole upload request."""
    client = personas.client("owner")
    big = client.post(reverse("upload"), {
        "files": [SimpleUploadedFile("a.jsonl", b"x" * 100_000)]})
    assert big.status_code == 413
    assert "78 KB" in big.content.decode()
    small = client.post(reverse("upload"), {
        "files": [SimpleUploadedFile("a.jsonl", b"x" * 10_000)]}, follow=True)
    assert small.status_code == 200


def test_other_member_posts_are_bounded_by_the_form_limit(personas, settings):
    """issue 20 item 9: a comment or profile form never needs more than a form's bytes."""
    client = personas.client("owner")
    response = client.post(reverse("team-switch", args=["alpha"]), {"x": "1"},
                           CONTENT_LENGTH=str(settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 2**20))
    assert response.status_code == 413
    ordinary = client.post(reverse("team-switch", args=["alpha"]))
    assert ordinary.status_code == 302


def test_a_refused_page_body_answers_in_the_apps_layout(no_parsing):
    """A 413 to a browser is the styled error page with the reason, not a bare text body."""
    response = Client().post(reverse("login"), {"username": "x"}, CONTENT_LENGTH=str(HUGE))
    assert response.status_code == 413
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Error 413" in page and "Back to the sessions" in page
    assert "600.0 MB, over the 64 KB this page accepts" in page


def test_a_refused_api_body_answers_in_the_apis_json_shape(no_parsing):
    response = Client().post("/api/v1/sessions", b"{}", content_type="application/json",
                             CONTENT_LENGTH=str(HUGE))
    assert response.status_code == 413
    assert response.json()["detail"].startswith("The request is too large: 600.0 MB")
