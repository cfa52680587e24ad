from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "ctxsim.reviews"
    verbose_name = "Reviews"

    def ready(self) -> None:
        from ctxsim.reviews import receivers
        from ctxsim.transcripts import signals

        signals.sessions_imported.connect(
            receivers.on_sessions_imported, dispatch_uid="reviews-record-uploads"
        )
