from django.urls import path

from ctxsim.replays import views

urlpatterns = [
    path("sessions/<int:session_id>/", views.session_page, name="session-detail"),
    path("sessions/<int:session_id>/message/", views.message_body, name="session-message"),
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
    path("sessions/<int:session_id>/spills/<int:spill_id>/", views.spill_view, name="spill-view"),
    path(
        "sessions/<int:session_id>/spills/<int:spill_id>/download/",
        views.spill_download,
        name="spill-download",
    ),
]
