from django.urls import path

from ctxsim.replays import views

urlpatterns = [
    path("sessions/<int:session_id>/", views.session_page, name="session-detail"),
]
