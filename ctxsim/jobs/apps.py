from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "ctxsim.jobs"
    label = "jobs"

    def ready(self) -> None:
        from ctxsim.jobs import receivers  # noqa: F401
