"""Import jobs keep their payload here; their life (status, progress, heartbeat, owner, ...) moves to
`jobs.Job` with the same ids (issue 30). The old table goes in 0010, once `api.ReceivedFile` points to
the new one."""

import django.db.models.deletion
from django.db import migrations, models

from ctxsim.jobs.carry import carry


def forwards(apps, schema_editor):
    carry(apps, schema_editor, app="transcripts", old="OldImportJob", new="ImportJob", kind="import",
          queue="imports",
          rename={"progress": "done"}, extra={"total": 100}, keep_ids=True)


PTR = ("job_ptr", models.OneToOneField(auto_created=True, on_delete=django.db.models.deletion.CASCADE, parent_link=True, primary_key=True, serialize=False, to="jobs.job"))


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0002_job"),
        ("transcripts", "0008_session_origin_and_upload_claim"),
    ]

    operations = [
        migrations.RemoveIndex("ImportJob", "transcripts_team_id_34bcb8_idx"),
        migrations.RemoveIndex("ImportJob", "transcripts_status_42ccdd_idx"),
        migrations.RenameModel("ImportJob", "OldImportJob"),
        migrations.CreateModel(
            name="ImportJob",
            fields=[
                PTR,
                ("file_name", models.CharField(max_length=500)),
                ("size", models.PositiveBigIntegerField()),
                ("stored_name", models.CharField(blank=True, max_length=500)),
                ("format", models.CharField(blank=True, help_text="forced format; empty = detect", max_length=40)),
                ("sha256", models.CharField(blank=True, help_text="of the uploaded bytes", max_length=64)),
                ("session_ids", models.JSONField(blank=True, default=list)),
                ("redactions", models.JSONField(blank=True, default=dict)),
                ("origin", models.JSONField(blank=True, default=dict)),
            ],
            options={"ordering": ["-created_at", "-pk"]},
            bases=("jobs.job",),
        ),
        # Going back recreates the old table empty: the rows stay with `Job` (not carried back).
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
    ]
