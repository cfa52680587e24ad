from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "ctxsim.teams"
    verbose_name = "Teams"
