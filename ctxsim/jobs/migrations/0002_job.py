"""One table for every background job's life (issue 30); the kinds move onto it next."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0001_initial"),
        ("teams", "0003_redaction"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Job",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("kind", models.CharField(help_text="import, sweep, replay, trace", max_length=20)),
                ("queue", models.CharField(default="default", max_length=20)),
                ("status", models.CharField(choices=[("queued", "Queued"), ("running", "Running"), ("done", "Done"), ("failed", "Failed"), ("cancelled", "Cancelled")], default="queued", max_length=10)),
                ("done", models.PositiveIntegerField(default=0, help_text="steps done (an import: percent)")),
                ("total", models.PositiveIntegerField(default=0, help_text="steps in all")),
                ("message", models.TextField(blank=True)),
                ("task_id", models.CharField(blank=True, help_text="the queued task's id", max_length=64)),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("heartbeat_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("team", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="jobs", to="teams.team")),
                ("user", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+", to=settings.AUTH_USER_MODEL)),
            ],
            options={
                "indexes": [models.Index(fields=["kind", "status"], name="job_kind_status"), models.Index(fields=["team", "status"], name="job_team_status"), models.Index(fields=["status"], name="job_status")],
            },
        ),
    ]
