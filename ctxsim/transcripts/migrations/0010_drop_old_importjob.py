"""The import jobs' old table, its rows carried onto `jobs.Job` by 0009."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("api", "0003_receivedfile_job_on_job"),
        ("transcripts", "0009_importjob_on_job"),
    ]

    operations = [
        migrations.DeleteModel("OldImportJob"),
    ]
