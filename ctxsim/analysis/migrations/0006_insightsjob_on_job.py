"""Insights jobs keep their payload here; their life moves to `jobs.Job` (issue 30). Queued
insights tasks are given the new ids."""

import django.db.models.deletion
from django.db import migrations, models

from ctxsim.jobs.carry import carry, team_of_session


def forwards(apps, schema_editor):
    carry(apps, schema_editor, app="analysis", old="OldInsightsJob", new="InsightsJob",
          kind="insights", queue="replays", team_of=team_of_session(apps),
          task_path="ctxsim.analysis.tasks.compute_insights")


PTR = ("job_ptr", models.OneToOneField(auto_created=True, on_delete=django.db.models.deletion.CASCADE, parent_link=True, primary_key=True, serialize=False, to="jobs.job"))


class Migration(migrations.Migration):

    dependencies = [
        ("analysis", "0005_sweep_on_job"),
    ]

    operations = [
        migrations.RemoveConstraint("InsightsJob", "one_insights_job_per_replay_and_rule"),
        migrations.RenameModel("InsightsJob", "OldInsightsJob"),
        migrations.CreateModel(
            name="InsightsJob",
            fields=[
                PTR,
                ("key", models.CharField(help_text="the replay's run key (settings)", max_length=64)),
                ("rule", models.CharField(help_text="model, lifetime and price", max_length=200)),
                ("query", models.TextField(help_text="the replay settings as the session page's query")),
                ("cache", models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')),
                ("session", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="insights_jobs", to="transcripts.session")),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("session", "key", "rule"), name="one_insights_job_per_replay_and_rule")]},
            bases=("jobs.job",),
        ),
        # Going back recreates the old table empty: the rows stay with `Job` (not carried back).
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel("OldInsightsJob"),
    ]
