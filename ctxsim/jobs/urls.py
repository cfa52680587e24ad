from django.urls import path

from ctxsim.jobs import views

urlpatterns = [
    path("jobs/<int:job_id>/", views.job_poll, name="job-poll"),
]
