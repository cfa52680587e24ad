"""`insert_rows` / `update_rows` outside a transaction, when a foreign key's parent is gone.

CI on PostgreSQL once answered 500 when an upload replaced a session whose default replay was
still storing its token counts: the deferred foreign-key check failed inside psycopg's pipeline
and left the connection stuck. The helpers now wrap each `executemany` in a transaction: the
failure is a plain `IntegrityError` and the connection keeps working. Runs on SQLite and
PostgreSQL (there the foreign keys are deferred, as Django creates them)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection
from django.urls import reverse

from ctxsim.replays.models import DerivedTokenCount
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.sql import insert_rows
from tests.factories import claude_code_bytes, upload

pytestmark = pytest.mark.django_db(transaction=True)


def _upload(personas, name: str, calls: int) -> None:
    personas.client("owner").post(reverse("upload"),
                                  {"files": [upload(name, claude_code_bytes(calls))]})


def test_a_row_whose_parent_was_deleted_fails_cleanly_and_the_connection_goes_on(personas):
    _upload(personas, "gone.jsonl", 2)
    session = Session.objects.get()
    gone = session.pk
    session.delete()
    assert connection.get_autocommit()  # the situation of a request, not a test transaction
    rows = [(gone, "cl100k", f"{n:064x}", n) for n in range(300)]
    with pytest.raises(IntegrityError):
        insert_rows(DerivedTokenCount, ("session", "counter", "digest", "tokens"), rows,
                    ignore_conflicts=True)
    assert not DerivedTokenCount.objects.exists()  # nothing half written, connection usable
    _upload(personas, "next.jsonl", 3)
    assert Session.objects.filter(source_name="next.jsonl").exists()
