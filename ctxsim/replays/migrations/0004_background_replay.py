"""`BackgroundReplay` comes from the `overview` app, its table renamed there (rows kept)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("overview", "0003_move_background_replay"),
        ("replays", "0003_compact_spills"),
        ("transcripts", "0007_upload_sha256"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='BackgroundReplay',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(help_text="the replay's run key (settings)", max_length=64)),
                        ('query', models.TextField(help_text="the replay settings as the session page's query")),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=10)),
                        ('done', models.PositiveIntegerField(default=0, help_text='calls replayed')),
                        ('total', models.PositiveIntegerField(default=0, help_text='calls of the session')),
                        ('message', models.TextField(blank=True)),
                        ('task_id', models.CharField(blank=True, help_text="the queued task's id", max_length=64)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='transcripts.session')),
                    ],
                    options={
                        'constraints': [models.UniqueConstraint(fields=('session', 'key'), name='one_background_replay_per_settings')],
                    },
                ),
            ],
        ),
    ]
