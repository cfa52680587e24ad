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

        from ctxsim.jobs import lifecycle
        from ctxsim.jobs.models import TraceFile
        from ctxsim.replays import background, deep_calls, traces
        from ctxsim.replays.models import BackgroundReplay, CallReplay
        from ctxsim.transcripts.tasks import import_timeout

        lifecycle.register(lifecycle.Kind("replay", BackgroundReplay, import_timeout,
                                          background.enqueue, doing="replaying"))
        lifecycle.register(lifecycle.Kind("trace", TraceFile, traces.trace_timeout,
                                          traces.enqueue_again, doing="writing the trace"))
        lifecycle.register(lifecycle.Kind("call", CallReplay, import_timeout,
                                          deep_calls.enqueue, doing="replaying to the call"))
