"""Error pages in the app's layout; controls shown only to roles that may use them (issue 19)."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

pytestmark = pytest.mark.django_db

LAYOUT = 'class="topbar"'


def test_a_missing_page_is_a_styled_404_in_the_layout(personas):
    response = personas.client("owner").get("/sessions/999999/")
    assert response.status_code == 404
    html = response.content.decode()
    assert LAYOUT in html and "Not found" in html and "Back to the sessions" in html


def test_an_outsider_gets_the_same_404_as_for_a_missing_object(personas):
    response = personas.client("outsider").get(reverse("team-members", args=[personas.team.slug]))
    assert response.status_code == 404
    assert LAYOUT in response.content.decode()


def test_a_refused_action_is_a_styled_403_with_the_reason(personas):
    response = personas.client("viewer").post(reverse("upload"), {})
    assert response.status_code == 403
    html = response.content.decode()
    assert LAYOUT in html and "Not allowed" in html and "read-only" in html


def test_the_500_page_renders_without_a_request_context():
    html = render_to_string("500.html")
    assert LAYOUT in html and "Something went wrong" in html and "Traceback" not in html


def test_viewers_see_no_upload_link_or_form(personas):
    viewer = personas.client("viewer")
    home = viewer.get(reverse("home")).content.decode()
    assert f'href="{reverse("upload")}"' not in home
    upload = viewer.get(reverse("upload"))
    assert upload.status_code == 200
    html = upload.content.decode()
    assert 'enctype="multipart/form-data"' not in html and "not upload" in html


@pytest.mark.parametrize("persona", ["owner", "reviewer"])
def test_roles_that_may_upload_see_the_link_and_the_form(personas, persona):
    client = personas.client(persona)
    assert f'href="{reverse("upload")}"' in client.get(reverse("home")).content.decode()
    assert 'enctype="multipart/form-data"' in client.get(reverse("upload")).content.decode()


def test_no_template_comment_spans_lines_and_leaks_into_the_page(personas):
    """Django's {# #} comments are one-line only; a multi-line one is shown as text."""
    from tests.shared import ROOT

    open_comments = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in (ROOT / "templates").rglob("*.html")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "{#" in line and "#}" not in line.split("{#", 1)[1]
    ]
    assert not open_comments
    assert "Main navigation" not in personas.client("owner").get(reverse("home")).content.decode()


# --- answers that come without a page of their own (issue 26) ---------------------------------


def test_typing_a_post_only_address_gives_the_405_page_in_the_layout(personas):
    response = personas.client("owner").get(reverse("logout"))
    assert response.status_code == 405
    assert "POST" in response["Allow"]
    html = response.content.decode()
    assert LAYOUT in html and "Error 405" in html and "“Log out” button" in html
    assert response["Content-Type"].startswith("text/html")


def test_a_405_to_htmx_or_the_api_keeps_its_own_body(personas):
    client = personas.client("owner")
    htmx = client.get(reverse("logout"), headers={"HX-Request": "true"})
    assert htmx.status_code == 405 and LAYOUT not in htmx.content.decode()
    api = client.delete("/api/v1/sessions")
    assert api.status_code == 405
    assert LAYOUT not in api.content.decode()


def test_a_text_400_of_a_view_is_a_page_with_its_message(personas, stored):
    response = personas.client("owner").get(
        reverse("session-trace", args=[stored.pk]) + "?profile=chatcli&loop_mode=sideways")
    assert response.status_code == 400
    html = response.content.decode()
    assert LAYOUT in html and "Error 400" in html and "loop_mode" in html


def test_a_busy_replay_429_is_a_page_with_what_to_do(personas, stored):
    from ctxsim.replays.limits import replay_slot

    client = personas.client("viewer")
    with replay_slot(personas.users["viewer"]):  # another replay of theirs is running
        response = client.get(reverse("session-detail", args=[stored.pk])
                              + "?profile=none&toolContextCount=7", follow=True)
    assert response.status_code == 429 and response["Retry-After"]
    html = response.content.decode()
    assert LAYOUT in html and "Error 429" in html and "Retry in a few seconds" in html
