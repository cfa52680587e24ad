from django.apps import AppConfig


class ReplaysConfig(AppConfig):
    name = "ctxsim.replays"
    verbose_name = "Replays"

    def ready(self) -> None:
        from ctxsim.replays import receivers
        from ctxsim.transcripts import signals

        signals.import_finished.connect(
            receivers.on_import_finished, dispatch_uid="replays-default-stats"
        )
        signals.session_deleting.connect(
            receivers.on_session_deleting, dispatch_uid="replays-spill-files"
        )
