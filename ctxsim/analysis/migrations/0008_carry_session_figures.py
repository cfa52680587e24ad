"""The overview's `SessionFigures` rows move into the one store (issue 30).

Their key was a hash (`sha256([version, run key, cache rule])`), so each row's settings are
resolved again from its stored query and cache rule, and the row is carried only when they
give its own key under version 3 (the figures' version when they moved): a row they do not
give (figures of an older version, or settings that no longer resolve alike) was not read
any more. Done and failed rows are carried (into the session's insights row for the same
settings and rule when there is one); queued and running ones are left to the next overview
that asks for them, which queues them again in the new store.
"""

import hashlib
import json
from dataclasses import asdict

from django.db import migrations, transaction

VERSION = 3  # `ctxsim.overview.figures.FIGURES_VERSION` when the figures moved


def old_key(run_key: str, rule) -> str:
    text = json.dumps([VERSION, run_key, asdict(rule)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def resolve(row, team_id):
    """(run key, rule key) of an old row, or None when its settings do not give its key."""
    from django.http import QueryDict

    from ctxsim.analysis.choices import cache_choice, price_text
    from ctxsim.analysis.results import rule_key
    from ctxsim.replays.state import settings_from_query
    from ctxsim.teams.models import Team

    settings, problems = settings_from_query(QueryDict(row["query"]), Team(pk=team_id))
    cache, errors = cache_choice(row["cache"] | {"price": price_text(row["cache"])})
    if problems or errors:
        return None
    rule = cache.rule()
    if old_key(settings.key, rule) != row["key"]:
        return None
    return settings.key, rule_key(rule)


def forwards(apps, schema_editor):
    old = apps.get_model("overview", "SessionFigures")
    store = apps.get_model("analysis", "SessionResult")
    teams = dict(apps.get_model("transcripts", "Session").objects.values_list("pk", "team_id"))
    for row in old.objects.filter(status__in=("done", "failed")).order_by("pk").values():
        try:
            with transaction.atomic():
                where = resolve(row, teams[row["session_id"]])
        except Exception:  # noqa: BLE001 (a row that cannot be read is computed again)
            where = None
        if where is None:
            continue
        done = row["status"] == "done"
        store.objects.update_or_create(
            session_id=row["session_id"], key=where[0], rule=where[1], defaults={
                "figures": row["figures"] if done else None, "figures_version": VERSION,
                "message": "" if done else row["message"]})


class Migration(migrations.Migration):

    dependencies = [
        ("analysis", "0007_session_result"),
        ("overview", "0003_move_background_replay"),
        ("replays", "0005_backgroundreplay_on_job"),
        ("teams", "0003_redaction"),
    ]

    operations = [
        migrations.RunPython(forwards, migrations.RunPython.noop, elidable=False),
    ]
