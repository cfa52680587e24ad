"""A received file's import job is the new `ImportJob` (on `jobs.Job`, same ids: issue 30)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("api", "0002_receivedfile_current_per_session_key"),
        ("transcripts", "0009_importjob_on_job"),
    ]

    operations = [
        migrations.AlterField(
            model_name="receivedfile",
            name="job",
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="received", to="transcripts.importjob"),
        ),
    ]
