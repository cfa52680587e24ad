"""Issue 20 ("Holds under hostile use"): concurrent writers queue instead of failing."""

from __future__ import annotations

import io
import threading

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client
from django.urls import reverse

from ctxsim.generator import write_claude_code_jsonl
from ctxsim.reviews.models import Comment
from ctxsim.teams.models import Membership, Role
from ctxsim.transcripts.models import Session
from ctxsim.transcripts.store import save_sessions
from tests.factories import spilling_session

WRITERS = 20
WRITES = 10
OWNERS = 4


def _transcript(seed: int) -> bytes:
    out = io.StringIO()
    write_claude_code_jsonl(out, 2, seed)
    return out.getvalue().encode()


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_writers_lose_nothing_and_see_no_error(personas):
    """issue 20 item 10: on SQLite 20 writers × 10 writes gave 36-53 "database is locked"
    500s (a read transaction upgrading to a write does not wait for the busy timeout): here
    comments, review status, owners' role changes and uploads, all at once."""
    session = save_sessions([spilling_session()], team=personas.team)[0]
    users, spares = [], {}
    for n in range(WRITERS):
        user = get_user_model().objects.create_user(f"writer{n}")
        # The first few are owners: their status writes are role changes of a spare member.
        role = Role.OWNER if n < OWNERS else Role.REVIEWER
        Membership.objects.create(team=personas.team, user=user, role=role)
        users.append(user)
        if n < OWNERS:
            spares[n] = Membership.objects.create(
                team=personas.team, user=get_user_model().objects.create_user(f"spare{n}"),
                role=Role.VIEWER)
    sessions_before = Session.objects.count()
    barrier = threading.Barrier(WRITERS)
    failures: list[str] = []
    statuses = ["in_review", "approved", "needs_changes", "open"]

    def work(n: int) -> None:
        client = Client()
        client.force_login(users[n])
        try:
            barrier.wait(timeout=60)
            for k in range(WRITES):
                kind = k % 3
                if kind == 0:
                    response = client.post(reverse("comment-create", args=[session.pk]),
                                           {"body": f"writer{n} note {k}", "call": "1"})
                elif kind == 1 and n in spares:
                    response = client.post(
                        reverse("team-member-role", args=["alpha", spares[n].pk]),
                        {"role": ["reviewer", "viewer"][k % 2]})
                elif kind == 1:
                    response = client.post(reverse("review-status", args=[session.pk]),
                                           {"status": statuses[(n + k) % 4]})
                else:
                    response = client.post(reverse("upload"), {"files": [SimpleUploadedFile(
                        f"w{n}-{k}.jsonl", _transcript(n * 100 + k))]})
                if response.status_code not in (200, 302):
                    failures.append(f"writer{n} write {k}: {response.status_code}")
        except Exception as exc:  # surfaced by the assertion below
            failures.append(f"writer{n}: {exc!r}")
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not failures, f"{len(failures)} failed writes: {failures[:5]}"

    comments = set(Comment.objects.filter(session=session).values_list("body", flat=True))
    expected = {f"writer{n} note {k}" for n in range(WRITERS) for k in range(WRITES)
                if k % 3 == 0}
    assert comments == expected
    uploads = sum(1 for k in range(WRITES) if k % 3 == 2) * WRITERS
    assert Session.objects.count() - sessions_before >= uploads
    names = set(Session.objects.values_list("source_name", flat=True))
    assert {f"w{n}-{k}.jsonl" for n in range(WRITERS) for k in range(WRITES)
            if k % 3 == 2} <= names
    last_role = {n: ["reviewer", "viewer"][max(k for k in range(WRITES) if k % 3 == 1) % 2]
                 for n in spares}
    for n, membership in spares.items():
        membership.refresh_from_db()
        assert membership.role == last_role[n]
