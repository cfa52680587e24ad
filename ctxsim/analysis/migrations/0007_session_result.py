"""The one store of per-session results (issue 30): `InsightsResult` becomes `SessionResult`
(its table renamed, its rows kept) and gains the overview's figures and the job computing
them; `0008` carries the overview's `SessionFigures` rows into it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("analysis", "0006_insightsjob_on_job"),
        ("jobs", "0005_job_counted"),
        ("transcripts", "0010_drop_old_importjob"),
    ]

    operations = [
        migrations.RemoveConstraint("InsightsResult", "one_insights_result_per_replay_and_rule"),
        migrations.RenameModel("InsightsResult", "SessionResult"),
        migrations.AlterField(
            model_name="sessionresult",
            name="session",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="results", to="transcripts.session"),
        ),
        migrations.AlterField(
            model_name="sessionresult",
            name="data",
            field=models.JSONField(blank=True, help_text="the insights report", null=True),
        ),
        migrations.AddField(
            model_name="sessionresult",
            name="figures",
            field=models.JSONField(blank=True, help_text="the overview's figures", null=True),
        ),
        migrations.AddField(
            model_name="sessionresult",
            name="figures_version",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="sessionresult",
            name="message",
            field=models.TextField(blank=True, help_text="why the figures failed"),
        ),
        migrations.AddField(
            model_name="sessionresult",
            name="job",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to="jobs.job"),
        ),
        migrations.AddField(
            model_name="sessionresult",
            name="attempt",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="sessionresult",
            constraint=models.UniqueConstraint(fields=("session", "key", "rule"), name="one_result_per_replay_and_rule"),
        ),
        migrations.AddIndex(
            model_name="sessionresult",
            index=models.Index(fields=["key", "rule", "session"], name="result_key_rule"),
        ),
    ]
