"""Sweeps keep their payload here; their life moves to `jobs.Job` (issue 30), their owner
(`created_by`) becoming the job's user. Queued sweep tasks are given the new ids."""

import django.db.models.deletion
from django.db import migrations, models

from ctxsim.jobs.carry import carry, team_of_session


def forwards(apps, schema_editor):
    carry(apps, schema_editor, app="analysis", old="OldSweep", new="Sweep", kind="sweep",
          queue="sweeps",
          rename={"created_by_id": "user_id"}, team_of=team_of_session(apps),
          task_path="ctxsim.analysis.tasks.run_sweep")


PTR = ("job_ptr", models.OneToOneField(auto_created=True, on_delete=django.db.models.deletion.CASCADE, parent_link=True, primary_key=True, serialize=False, to="jobs.job"))


class Migration(migrations.Migration):

    dependencies = [
        ("analysis", "0004_insights_job"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
        ("transcripts", "0010_drop_old_importjob"),
    ]

    operations = [
        migrations.RenameModel("Sweep", "OldSweep"),
        migrations.CreateModel(
            name="Sweep",
            fields=[
                PTR,
                ("query", models.TextField(blank=True)),
                ("axes", models.JSONField(help_text='[{"name": ..., "values": [...]}, ...]')),
                ("cache", models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')),
                ("points", models.JSONField(blank=True, default=list)),
                ("session", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="sweeps", to="transcripts.session")),
            ],
            options={"ordering": ["-created_at", "-pk"]},
            bases=("jobs.job",),
        ),
        # Going back recreates the old table empty: the rows stay with `Job` (not carried back).
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel("OldSweep"),
    ]
