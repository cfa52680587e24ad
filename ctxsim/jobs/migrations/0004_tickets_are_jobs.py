"""The quotas count jobs (issue 30): the live tickets of work with no table of its own (an
overview column's task, a corpus sweep) become bare jobs of their kind; the other tickets
stood for jobs that are now counted themselves. Then the tickets go."""

from datetime import timedelta

from django.db import migrations, models
from django.utils import timezone

TICKET_SECONDS = 3600


def forwards(apps, schema_editor):
    Ticket = apps.get_model("jobs", "Ticket")
    Job = apps.get_model("jobs", "Job")
    live = Ticket.objects.filter(created_at__gte=timezone.now() - timedelta(
        seconds=TICKET_SECONDS), team__isnull=False)
    bare = live.filter(models.Q(kind="overview") | models.Q(kind="sweep",
                                                            subject__startswith="team:"))
    for ticket in bare:
        kind = "overview" if ticket.kind == "overview" else "corpus"
        job = Job.objects.create(kind=kind, queue="replays" if kind == "overview" else "sweeps",
                                 user_id=ticket.user_id, team_id=ticket.team_id,
                                 task_id=ticket.task_id)
        Job.objects.filter(pk=job.pk).update(created_at=ticket.created_at)


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0003_tracefile_on_job"),
    ]

    operations = [
        migrations.AlterField(
            model_name="job",
            name="kind",
            field=models.CharField(help_text="import, sweep, replay, trace, insights, overview, corpus", max_length=20),
        ),
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel(name="Ticket"),
    ]
