"""The overview's work becomes jobs of `jobs.Job` (issue 30), and its figures live in the one
store (`analysis.SessionResult`, carried there by `analysis.0008`):

- an overview column's task is a `ColumnTask` job (its rows claimed by its attempts);
- a corpus sweep's parts are jobs (`CorpusSweepPart` extends `Job`): their status, message
  and start move onto `Job`, and queued part tasks are given the new ids;
- the bare jobs that stood for those tasks before are ended (cancelled): the tasks they
  stood for are either carried (parts) or skip (the old column tasks), and the next overview
  queues its missing rows again.
"""

import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone

from ctxsim.jobs.carry import carry

PTR = ("job_ptr", models.OneToOneField(auto_created=True, on_delete=django.db.models.deletion.CASCADE, parent_link=True, primary_key=True, serialize=False, to="jobs.job"))


def forwards(apps, schema_editor):
    apps.get_model("jobs", "Job").objects.filter(
        kind__in=("overview", "corpus"), status__in=("queued", "running")).update(
        status="cancelled", finished_at=timezone.now(),
        message="queued before the overview's work became jobs of their own")
    teams = dict(apps.get_model("overview", "CorpusSweep").objects.values_list("pk", "team_id"))
    carry(apps, schema_editor, app="overview", old="OldCorpusSweepPart", new="CorpusSweepPart",
          kind="corpus", queue="sweeps", rename={"sweep_id": "corpus_id"},
          extra={"counted": False},
          team_of=lambda row: teams[row["corpus_id"]],
          task_path="ctxsim.overview.tasks.run_corpus_part")


class Migration(migrations.Migration):

    dependencies = [
        ("overview", "0003_move_background_replay"),
        ("analysis", "0008_carry_session_figures"),
        ("jobs", "0005_job_counted"),
        ("django_tasks_database", "0021_conditional_partial_index_ordering"),
    ]

    operations = [
        migrations.CreateModel(
            name="ColumnTask",
            fields=[
                PTR,
                ("key", models.CharField(help_text="the replay's run key (settings)", max_length=64)),
                ("rule", models.CharField(help_text="model, lifetime and price", max_length=200)),
                ("query", models.TextField(help_text="the replay settings as the session page's query")),
                ("cache", models.JSONField(help_text='{"model": ..., "lifetime": ..., "price": ...}')),
                ("sessions", models.JSONField(default=list, help_text="session ids, in the order taken")),
            ],
            bases=("jobs.job",),
        ),
        migrations.RemoveConstraint("CorpusSweepPart", "one_part_per_session"),
        migrations.RemoveIndex("CorpusSweepPart", "overview_co_sweep_i_7c205f_idx"),
        migrations.RenameModel("CorpusSweepPart", "OldCorpusSweepPart"),
        migrations.AlterField(
            model_name="oldcorpussweeppart",
            name="sweep",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="overview.corpussweep"),
        ),
        migrations.CreateModel(
            name="CorpusSweepPart",
            fields=[
                PTR,
                ("points", models.JSONField(blank=True, default=list, help_text="one entry per grid point")),
                ("corpus", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="parts", to="overview.corpussweep")),
                ("session", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="transcripts.session")),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("corpus", "session"), name="one_part_per_session")]},
            bases=("jobs.job",),
        ),
        # Going back recreates the old tables empty: the rows stay where they moved.
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel("OldCorpusSweepPart"),
        migrations.DeleteModel("SessionFigures"),
    ]
