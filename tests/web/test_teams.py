"""Team management: the owners' members page, roles, removals, and single-use invite links."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from ctxsim.teams.models import Invite, Membership, Role
from tests.factories import password_for

pytestmark = pytest.mark.django_db

User = get_user_model()


def members_url(slug: str = "alpha") -> str:
    return reverse("team-members", args=[slug])


def membership(personas, name: str) -> Membership:
    return Membership.objects.get(team=personas.team, user=personas.users[name])


def test_only_owners_open_the_members_page(personas):
    assert personas.client("owner").get(members_url()).status_code == 200
    assert personas.client("reviewer").get(members_url()).status_code == 403
    assert personas.client("viewer").get(members_url()).status_code == 403
    assert personas.client("outsider").get(members_url()).status_code == 404
    assert personas.client("anonymous").get(members_url()).status_code == 302


def test_the_team_list_links_owners_to_their_members_page(personas):
    assert members_url().encode() in personas.client("owner").get("/teams/").content
    assert members_url().encode() not in personas.client("reviewer").get("/teams/").content


def test_an_owner_adds_an_existing_user_by_username(personas):
    newcomer = User.objects.create_user("Dana", password="dana-pass-123")
    owner = personas.client("owner")
    response = owner.post(reverse("team-member-add", args=["alpha"]),
                          {"username": "dana", "role": "reviewer"}, follow=True)
    assert b"Dana joined Alpha as reviewer" in response.content
    assert Membership.objects.get(user=newcomer, team=personas.team).role == Role.REVIEWER
    again = owner.post(reverse("team-member-add", args=["alpha"]),
                       {"username": "Dana", "role": "viewer"}, follow=True)
    assert b"already a member" in again.content
    unknown = owner.post(reverse("team-member-add", args=["alpha"]),
                         {"username": "nobody", "role": "viewer"}, follow=True)
    assert "No user is called “nobody”" in unknown.content.decode()
    # The outsider exists but adding them needs the owner of alpha, not of beta.
    refused = personas.client("outsider").post(reverse("team-member-add", args=["alpha"]),
                                               {"username": "dana", "role": "owner"})
    assert refused.status_code == 404


def test_an_owner_changes_roles_and_removes_members(personas):
    owner = personas.client("owner")
    viewer = membership(personas, "viewer")
    owner.post(reverse("team-member-role", args=["alpha", viewer.pk]), {"role": "reviewer"})
    viewer.refresh_from_db()
    assert viewer.role == Role.REVIEWER
    response = owner.post(reverse("team-member-remove", args=["alpha", viewer.pk]))
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=viewer.pk).exists()
    assert personas.client("viewer").get("/sessions/1/").status_code == 404


def test_a_team_always_keeps_an_owner(personas):
    owner = personas.client("owner")
    mine = membership(personas, "owner")
    demote = owner.post(reverse("team-member-role", args=["alpha", mine.pk]), {"role": "viewer"},
                        follow=True)
    assert b"A team needs an owner" in demote.content
    owner.post(reverse("team-member-remove", args=["alpha", mine.pk]))
    mine.refresh_from_db()
    assert mine.role == Role.OWNER
    # With a second owner the first may step down, and then loses the page.
    Membership.objects.filter(pk=membership(personas, "reviewer").pk).update(role=Role.OWNER)
    response = owner.post(reverse("team-member-role", args=["alpha", mine.pk]),
                          {"role": "viewer"})
    assert response["Location"] == reverse("team-list")
    assert owner.get(members_url()).status_code == 403


def test_members_of_another_team_cannot_be_reached_through_this_team(personas):
    outsider = Membership.objects.get(user=personas.users["outsider"])
    response = personas.client("owner").post(
        reverse("team-member-remove", args=["alpha", outsider.pk]))
    assert response.status_code == 404
    assert Membership.objects.filter(pk=outsider.pk).exists()


def test_a_bad_role_is_refused(personas):
    viewer = membership(personas, "viewer")
    response = personas.client("owner").post(
        reverse("team-member-role", args=["alpha", viewer.pk]), {"role": "admin"}, follow=True)
    assert b"Choose a role" in response.content
    viewer.refresh_from_db()
    assert viewer.role == Role.VIEWER


def create_invite(personas, role: str = "reviewer") -> Invite:
    personas.client("owner").post(reverse("team-invite-create", args=["alpha"]), {"role": role})
    return Invite.objects.order_by("-pk").first()


def test_an_invite_link_lets_a_new_user_set_a_password_and_join(personas, settings):
    settings.CTXSIM_INVITE_DAYS = 3
    invite = create_invite(personas)
    assert invite.role == Role.REVIEWER
    assert timedelta(days=2, hours=23) < invite.expires_at - timezone.now() <= timedelta(days=3)
    url = reverse("invite-accept", args=[invite.token])
    assert url.encode() in personas.client("owner").get(members_url()).content

    visitor = Client()
    form = visitor.get(url)
    assert form.status_code == 200 and b"Join Alpha" in form.content
    bad = visitor.post(url, {"username": "erin", "password1": "x", "password2": "y"})
    assert bad.status_code == 200 and not User.objects.filter(username="erin").exists()
    response = visitor.post(url, {"username": "erin", "password1": "erin-pass-123!",
                                  "password2": "erin-pass-123!"})
    assert response.status_code == 302 and response["Location"] == reverse("home")
    erin = User.objects.get(username="erin")
    assert erin.check_password("erin-pass-123!")
    assert Membership.objects.get(user=erin).role == Role.REVIEWER
    assert visitor.get("/").wsgi_request.user == erin  # logged in, working in Alpha
    assert b"Alpha" in visitor.get("/").content

    # Single use: the next visitor finds a dead link, and no account is made.
    late = Client()
    assert late.get(url).status_code == 404
    assert late.post(url, {"username": "frank", "password1": "frank-pass-123!",
                           "password2": "frank-pass-123!"}).status_code == 404
    assert not User.objects.filter(username="frank").exists()


def test_an_expired_or_revoked_invite_does_not_work(personas):
    invite = create_invite(personas)
    Invite.objects.filter(pk=invite.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = Client().get(reverse("invite-accept", args=[invite.token]))
    assert response.status_code == 404 and b"does not work" in response.content
    assert Client().get(reverse("invite-accept", args=["not-a-token"])).status_code == 404

    second = create_invite(personas)
    personas.client("owner").post(reverse("team-invite-revoke", args=["alpha", second.pk]))
    assert Client().get(reverse("invite-accept", args=[second.token])).status_code == 404


def test_a_logged_in_user_joins_with_one_click_and_switches_to_the_team(personas):
    invite = create_invite(personas, role="viewer")
    url = reverse("invite-accept", args=[invite.token])
    client = Client()
    client.post(reverse("login"), {"username": "outsider", "password": password_for("outsider")})
    page = client.get(url)
    assert b"Logged in as <strong>outsider</strong>" in page.content
    assert client.post(url).status_code == 302
    joined = Membership.objects.get(team=personas.team, user=personas.users["outsider"])
    assert joined.role == Role.VIEWER
    assert client.session["ctxsim_team_id"] == personas.team.pk
    invite.refresh_from_db()
    assert invite.used_by == personas.users["outsider"] and invite.used_at
    # Now in two teams, the outsider switches back to their own.
    client.post(reverse("team-switch", args=["beta"]))
    assert client.session["ctxsim_team_id"] == personas.other_team.pk


def test_a_member_opening_an_invite_does_not_spend_it(personas):
    invite = create_invite(personas)
    url = reverse("invite-accept", args=[invite.token])
    viewer = personas.client("viewer")
    assert b"already a member" in viewer.get(url).content
    viewer.post(url)
    invite.refresh_from_db()
    assert invite.used_at is None
    assert membership(personas, "viewer").role == Role.VIEWER  # not upgraded by the link


def test_only_owners_create_invites(personas):
    assert personas.client("reviewer").post(
        reverse("team-invite-create", args=["alpha"]), {"role": "owner"}).status_code == 403
    assert personas.client("outsider").post(
        reverse("team-invite-create", args=["alpha"]), {"role": "owner"}).status_code == 404
    assert not Invite.objects.exists()
