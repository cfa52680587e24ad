"""Helper copies of work counted once (an overview column's second task, a corpus sweep's
parts but one) are jobs of their own that the quotas do not count (issue 30)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0004_tickets_are_jobs"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="counted",
            field=models.BooleanField(default=True, help_text="counted by the quotas (not the helper copies of work already counted once)"),
        ),
    ]
