from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "ctxsim.jobs"
    label = "jobs"
