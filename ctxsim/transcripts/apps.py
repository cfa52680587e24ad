from django.apps import AppConfig


class TranscriptsConfig(AppConfig):
    name = "ctxsim.transcripts"
    verbose_name = "Transcripts"
