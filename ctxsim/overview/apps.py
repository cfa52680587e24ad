from django.apps import AppConfig


class OverviewConfig(AppConfig):
    name = "ctxsim.overview"
    verbose_name = "Team overview and corpus sweeps"
