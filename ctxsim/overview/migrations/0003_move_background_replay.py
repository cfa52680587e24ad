"""`BackgroundReplay` moves to the `replays` app (the layer that owns replays decides when one is
handed to the worker; issue 30): its table is renamed, its rows stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("overview", "0002_background_replay"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterModelTable("BackgroundReplay", "replays_backgroundreplay"),
            ],
            state_operations=[migrations.DeleteModel("BackgroundReplay")],
        ),
    ]
