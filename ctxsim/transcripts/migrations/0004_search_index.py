"""The full-text tables (see ctxsim/transcripts/search.py), filled with what is already stored."""

from django.db import migrations


def create(apps, schema_editor):
    from ctxsim.pipeline.messages import decode_for_display
    from ctxsim.transcripts.search import INDEX_CHARS, for_vendor

    backend = for_vendor(schema_editor.connection.vendor)
    Content = apps.get_model("transcripts", "Content")
    Message = apps.get_model("transcripts", "Message")
    with schema_editor.connection.cursor() as cursor:
        backend.create(cursor)
        for pk, data in Content.objects.values_list("pk", "data").iterator(chunk_size=200):
            backend.add(cursor, "search_content",
                        [(pk, decode_for_display(bytes(data[:INDEX_CHARS * 4])))])
        rows = Message.objects.exclude(tool_calls=[]).values_list("pk", "tool_calls")
        backend.add(cursor, "search_args",
                    [(pk, "\n".join(str(c.get("arguments", "")) for c in calls))
                     for pk, calls in rows.iterator(chunk_size=500)])


def drop(apps, schema_editor):
    from ctxsim.transcripts.search import for_vendor

    with schema_editor.connection.cursor() as cursor:
        for_vendor(schema_editor.connection.vendor).drop(cursor)


class Migration(migrations.Migration):
    dependencies = [("transcripts", "0003_content_token_counts")]
    operations = [migrations.RunPython(create, drop)]
