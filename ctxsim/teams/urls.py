from django.contrib.auth import views as auth_views
from django.urls import path

from ctxsim.teams import views

urlpatterns = [
    path("teams/", views.team_list, name="team-list"),
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("teams/<slug:slug>/switch/", views.switch, name="team-switch"),
]
