"""Trace files keep their payload here; their life moves to `jobs.Job` (issue 30). Queued trace
tasks are given the new ids."""

import django.db.models.deletion
from django.db import migrations, models

from ctxsim.jobs.carry import carry, team_of_session


def forwards(apps, schema_editor):
    carry(apps, schema_editor, app="jobs", old="OldTraceFile", new="TraceFile", kind="trace",
          queue="replays", team_of=team_of_session(apps),
          task_path="ctxsim.replays.traces.write_trace_file")


PTR = ("job_ptr", models.OneToOneField(auto_created=True, on_delete=django.db.models.deletion.CASCADE, parent_link=True, primary_key=True, serialize=False, to="jobs.job"))


class Migration(migrations.Migration):

    dependencies = [
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
        ("jobs", "0002_job"),
        ("transcripts", "0010_drop_old_importjob"),
    ]

    operations = [
        migrations.RemoveConstraint("TraceFile", "one_trace_file_per_settings"),
        migrations.RenameModel("TraceFile", "OldTraceFile"),
        migrations.CreateModel(
            name="TraceFile",
            fields=[
                PTR,
                ("key", models.CharField(help_text="the replay's run key (settings)", max_length=64)),
                ("summary", models.BooleanField(default=True)),
                ("query", models.TextField(help_text="the replay settings as the session page's query")),
                ("stored_name", models.CharField(blank=True, max_length=300)),
                ("size", models.PositiveBigIntegerField(default=0)),
                ("session", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="transcripts.session")),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("session", "key", "summary"), name="one_trace_file_per_settings")]},
            bases=("jobs.job",),
        ),
        # Going back recreates the old table empty: the rows stay with `Job` (not carried back).
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel("OldTraceFile"),
    ]
