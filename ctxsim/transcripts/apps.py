from django.apps import AppConfig


class TranscriptsConfig(AppConfig):
    name = "ctxsim.transcripts"
    verbose_name = "Transcripts"

    def ready(self) -> None:
        from ctxsim.jobs import lifecycle
        from ctxsim.transcripts import tasks
        from ctxsim.transcripts.models import ImportJob

        lifecycle.register(lifecycle.Kind("import", ImportJob, tasks.import_timeout,
                                          tasks.enqueue, tasks.last_word, "importing"))
