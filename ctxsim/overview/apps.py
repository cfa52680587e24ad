from django.apps import AppConfig


class OverviewConfig(AppConfig):
    name = "ctxsim.overview"
    verbose_name = "Team overview and corpus sweeps"

    def ready(self) -> None:
        from ctxsim.jobs import lifecycle
        from ctxsim.overview import tasks
        from ctxsim.overview.models import ColumnTask, CorpusSweepPart

        lifecycle.register(lifecycle.Kind("overview", ColumnTask, tasks.timeout,
                                          tasks.enqueue_column,
                                          doing="computing an overview column"))
        lifecycle.register(lifecycle.Kind("corpus", CorpusSweepPart, tasks.timeout,
                                          tasks.enqueue_part, tasks.part_last_word,
                                          "sweeping a session of a corpus sweep"))
