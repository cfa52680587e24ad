from django.urls import path

from ctxsim.api import views
from ctxsim.api.api import urls as api_urls

urlpatterns = [
    path("api/v1/", api_urls()),
    path("teams/<slug:slug>/tokens/", views.token_create, name="team-token-create"),
    path("teams/<slug:slug>/tokens/<int:token_id>/revoke/", views.token_revoke,
         name="team-token-revoke"),
    path("teams/<slug:slug>/redaction/", views.redaction, name="team-redaction"),
]
