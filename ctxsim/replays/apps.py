from django.apps import AppConfig


class ReplaysConfig(AppConfig):
    name = "ctxsim.replays"
    verbose_name = "Replays"
