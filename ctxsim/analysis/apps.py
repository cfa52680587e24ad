from django.apps import AppConfig


class AnalysisConfig(AppConfig):
    name = "ctxsim.analysis"
    verbose_name = "Cache & information loss"

    def ready(self) -> None:
        from ctxsim.analysis import results, tasks
        from ctxsim.analysis.models import InsightsJob, Sweep
        from ctxsim.jobs import lifecycle
        from ctxsim.replays import beside

        lifecycle.register(lifecycle.Kind("sweep", Sweep, tasks.sweep_timeout, tasks.enqueue,
                                          tasks.last_word, "sweeping"))
        lifecycle.register(lifecycle.Kind("insights", InsightsJob, tasks.insights_timeout,
                                          tasks.enqueue_insights,
                                          doing="computing the insights"))
        # The session page shows the stored headline on its link to this app's page.
        beside.register("insights", results.stored_headline)
