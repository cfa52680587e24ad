from django.urls import path

from ctxsim.replays import call_parts, views

urlpatterns = [
    path("sessions/<int:session_id>/", views.session_page, name="session-detail"),
    path("sessions/<int:session_id>/message/", call_parts.message_body, name="session-message"),
    path("sessions/<int:session_id>/rows/", call_parts.message_rows, name="session-rows"),
    path("sessions/<int:session_id>/trace/", views.trace_download, name="session-trace"),
    path("sessions/<int:session_id>/compare/", views.compare, name="session-compare"),
    path("sessions/<int:session_id>/export/", views.profile_export, name="profile-export"),
    path("sessions/<int:session_id>/profiles/save/", views.profile_save, name="profile-save"),
    path(
        "sessions/<int:session_id>/profiles/import/", views.profile_import, name="profile-import"
    ),
    path(
        "sessions/<int:session_id>/profiles/<int:profile_id>/delete/", views.profile_delete,
        name="profile-delete",
    ),
    # A spill is its run's key and its position in the run (`spills.SpillRef.ref`).
    path("sessions/<int:session_id>/spills/<slug:run>/<int:seq>/", views.spill_view,
         name="spill-view"),
    path(
        "sessions/<int:session_id>/spills/<slug:run>/<int:seq>/download/",
        views.spill_download,
        name="spill-download",
    ),
]
