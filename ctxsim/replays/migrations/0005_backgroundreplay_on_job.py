"""Background replays keep their payload here; their life moves to `jobs.Job` (issue 30)."""

import django.db.models.deletion
from django.db import migrations, models

from ctxsim.jobs.carry import carry, team_of_session


def forwards(apps, schema_editor):
    carry(apps, schema_editor, app="replays", old="OldBackgroundReplay", new="BackgroundReplay", kind="replay",
          queue="replays", team_of=team_of_session(apps))


PTR = ("job_ptr", models.OneToOneField(auto_created=True, on_delete=django.db.models.deletion.CASCADE, parent_link=True, primary_key=True, serialize=False, to="jobs.job"))


class Migration(migrations.Migration):

    dependencies = [
        ("replays", "0004_background_replay"),
        ("transcripts", "0010_drop_old_importjob"),
    ]

    operations = [
        migrations.RemoveConstraint("BackgroundReplay", "one_background_replay_per_settings"),
        migrations.RenameModel("BackgroundReplay", "OldBackgroundReplay"),
        migrations.CreateModel(
            name="BackgroundReplay",
            fields=[
                PTR,
                ("key", models.CharField(help_text="the replay's run key (settings)", max_length=64)),
                ("query", models.TextField(help_text="the replay settings as the session page's query")),
                ("session", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="transcripts.session")),
            ],
            options={"constraints": [models.UniqueConstraint(fields=("session", "key"), name="one_background_replay_per_settings")]},
            bases=("jobs.job",),
        ),
        # Going back recreates the old table empty: the rows stay with `Job` (not carried back).
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
        migrations.DeleteModel("OldBackgroundReplay"),
    ]
