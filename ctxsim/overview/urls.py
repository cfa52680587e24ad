from django.urls import path

from ctxsim.overview import views

urlpatterns = [
    path("overview/", views.team_overview, name="team-overview"),
    path("overview/sweeps/", views.corpus_sweeps, name="corpus-sweeps"),
    path("overview/sweeps/new/", views.corpus_sweep_create, name="corpus-sweep-create"),
    path("overview/sweeps/<int:corpus_sweep_id>/", views.corpus_sweep_detail,
         name="corpus-sweep-detail"),
    path("overview/sweeps/<int:corpus_sweep_id>/cancel/", views.corpus_sweep_cancel,
         name="corpus-sweep-cancel"),
    path("overview/sweeps/<int:corpus_sweep_id>/apply/", views.corpus_sweep_apply,
         name="corpus-sweep-apply"),
]
