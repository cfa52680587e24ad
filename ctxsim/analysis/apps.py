from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "ctxsim.analysis"
    verbose_name = "Cache & information loss"
