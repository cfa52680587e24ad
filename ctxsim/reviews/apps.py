from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "ctxsim.reviews"
    verbose_name = "Reviews"
