"""Seed the load-test database: `python -m loadtest.seed USERS SESSIONS CALLS` (Django settings
and DATABASE_URL from the environment, pointing at the dedicated load database).

Creates a team, USERS reviewers (one password hash shared by all: hashing is deliberately slow)
and SESSIONS generated sessions of CALLS calls each, stored as an import stores them, then
replays each with the default profile (warming the replay cache, filling the list figures).
Each reviewer gets a logged-in Django session, as if they had signed in before the test.
Prints one JSON line: session ids and calls, the reviewers' session cookies, and whether the
team-review feature (a URL named `comment-create`) exists.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    users, sessions, calls = (int(a) for a in sys.argv[1:4])
    import django

    django.setup()
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.auth.hashers import make_password
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command
    from django.urls import NoReverseMatch, reverse

    from ctxsim.generator import generate_session
    from ctxsim.replays.services import compute_default_stats
    from ctxsim.teams.models import Membership, Role, Team
    from ctxsim.transcripts.store import save_sessions

    started = time.perf_counter()
    call_command("migrate", verbosity=0)
    team = Team.objects.create(name="Load test", slug="load")
    User = get_user_model()
    shared_hash = make_password("load-test-pass-123")
    reviewers = User.objects.bulk_create(
        [User(username=f"reviewer-{n:02d}", password=shared_hash) for n in range(users)]
    )
    reviewers = list(User.objects.filter(username__startswith="reviewer-").order_by("username"))
    Membership.objects.bulk_create(
        [Membership(team=team, user=u, role=Role.REVIEWER) for u in reviewers]
    )
    rows = []
    for n in range(sessions):
        session = generate_session(calls, seed=100 + n)
        rows.extend(save_sessions([session], team=team, user=reviewers[0],
                                  source_name=f"load-{n:02d}.jsonl"))
    seeded = time.perf_counter()
    for row in rows:
        compute_default_stats(row)
    warmed = time.perf_counter()

    cookies = []
    for user in reviewers:
        store = SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        cookies.append(store.session_key)
    try:
        reverse("comment-create", args=[rows[0].pk])
        comments = True
    except NoReverseMatch:
        comments = False
    print(json.dumps({
        "sessions": [{"id": r.pk, "calls": r.model_call_count} for r in rows],
        "cookies": cookies, "comments": comments,
        "seed_seconds": seeded - started, "warm_seconds": warmed - seeded,
    }), flush=True)


if __name__ == "__main__":
    main()
