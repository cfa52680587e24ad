"""ctxsim URL configuration. Every view requires login (LoginRequiredMiddleware) unless marked."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("ctxsim.teams.urls")),
    path("", include("ctxsim.transcripts.urls")),
    path("", include("ctxsim.replays.urls")),
    path("", include("ctxsim.analysis.urls")),
    path("", include("ctxsim.overview.urls")),
    path("", include("ctxsim.reviews.urls")),
    path("", include("ctxsim.api.urls")),
    path("", include("ctxsim.jobs.urls")),
]
