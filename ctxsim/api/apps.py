from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "ctxsim.api"
    label = "api"
    verbose_name = "REST API and tokens"
