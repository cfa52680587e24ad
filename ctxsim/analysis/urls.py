from django.urls import path

from ctxsim.analysis import views

urlpatterns = [
    path("sessions/<int:session_id>/insights/", views.insights_page, name="session-insights"),
    path("sessions/<int:session_id>/sweeps/", views.sweep_page, name="session-sweeps"),
    path("sessions/<int:session_id>/sweeps/new/", views.sweep_create, name="sweep-create"),
    path("sessions/<int:session_id>/sweeps/<int:sweep_id>/", views.sweep_detail,
         name="sweep-detail"),
    path("sessions/<int:session_id>/sweeps/<int:sweep_id>/cancel/", views.sweep_cancel,
         name="sweep-cancel"),
]
