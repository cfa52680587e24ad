from django.contrib.auth import views as auth_views
from django.urls import path

from ctxsim.teams import views

urlpatterns = [
    path("teams/", views.team_list, name="team-list"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("teams/<slug:slug>/switch/", views.switch, name="team-switch"),
    path("teams/<slug:slug>/members/", views.members, name="team-members"),
    path("teams/<slug:slug>/members/add/", views.member_add, name="team-member-add"),
    path("teams/<slug:slug>/members/<int:membership_id>/role/", views.member_role,
         name="team-member-role"),
    path("teams/<slug:slug>/members/<int:membership_id>/remove/", views.member_remove,
         name="team-member-remove"),
    path("teams/<slug:slug>/invites/", views.invite_create, name="team-invite-create"),
    path("teams/<slug:slug>/invites/<int:invite_id>/revoke/", views.invite_revoke,
         name="team-invite-revoke"),
    # Open to anonymous visitors (login_not_required): the token is the permission.
    path("invites/<str:token>/", views.invite_accept, name="invite-accept"),
]
