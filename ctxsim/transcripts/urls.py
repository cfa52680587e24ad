from django.urls import path

from ctxsim.transcripts import views

urlpatterns = [
    # The sessions list is the home page; `home` is what login and the brand link go to.
    path("", views.session_list, name="home"),
    path("uploads/", views.upload, name="upload"),
    path("uploads/results/<str:batch>/", views.upload_result_page, name="upload-results"),
    path("uploads/results/<str:batch>/<int:index>/again/", views.upload_again,
         name="upload-again"),
    path("uploads/jobs/<int:job_id>/", views.import_job, name="import-job"),
    path("uploads/jobs/<int:job_id>/requeue/", views.requeue_job, name="import-job-requeue"),
    path("sessions/<int:session_id>/delete/", views.session_delete, name="session-delete"),
    path("sessions/<int:session_id>/rename/", views.session_rename, name="session-rename"),
    path("search/", views.search_contents, name="search"),
]
