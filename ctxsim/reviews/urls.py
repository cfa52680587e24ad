from django.urls import path

from ctxsim.reviews import views

urlpatterns = [
    path("sessions/<int:session_id>/comments/", views.comment_create, name="comment-create"),
    path("sessions/<int:session_id>/review-status/", views.review_status, name="review-status"),
    path("sessions/<int:session_id>/activity/", views.activity, name="session-activity"),
    path("comments/<int:comment_id>/", views.comment_permalink, name="comment-permalink"),
    path("comments/<int:comment_id>/resolve/", views.comment_resolve, name="comment-resolve"),
]
