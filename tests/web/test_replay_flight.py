"""Issue 31: the processes of a machine take turns at replaying the same settings
(`ctxsim/replays/flight.py`): a request whose replay another process is running waits for it
and reads the run it stored instead of replaying it again."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connections
from django.http import QueryDict
from django.urls import reverse

from ctxsim.replays import flight, services
from ctxsim.replays.cache import REPLAYS, ReplayKey
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.state import session_settings

QUERY = "profile=chatcli&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS=4321"
REPLAY = {"HX-Request": "true", "HX-Target": "section#replay"}


@pytest.fixture
def lock_dir(settings, tmp_path):
    settings.CTXSIM_LOCK_DIR = tmp_path / "locks"
    REPLAYS.clear()
    return settings.CTXSIM_LOCK_DIR


@pytest.fixture
def summary_replays(monkeypatch):
    """The summary replays requests run (`_replay_and_store`), and the unwatched original."""
    seen: list[tuple] = []
    real = services._replay_and_store

    def counted(*args, **kwargs):
        seen.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "_replay_and_store", counted)
    return seen, real


@pytest.mark.django_db(transaction=True)
def test_a_replay_another_process_runs_is_waited_for_and_read_not_run_again(
        personas, long_session, lock_dir, summary_replays):
    seen, replay_and_store = summary_replays
    session = long_session
    settings, errors = session_settings(QueryDict(QUERY), session)
    assert not errors
    page = reverse("session-detail", args=[session.pk]) + "?" + QUERY
    client = personas.client("viewer")
    answer: dict = {}

    def ask() -> None:
        try:
            response = client.get(page, headers=REPLAY)
            answer.update(status=response.status_code, html=response.content.decode())
        finally:
            connections.close_all()

    # "Another process" holds the lock of these settings (flock: another open file conflicts
    # as another process's would) while it replays and stores them.
    with flight.one_at_a_time(session.pk, settings.key):
        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(0.5)
        assert asking.is_alive()  # it waits for the lock
        replay_and_store(session, settings, ReplayKey.of(session, settings.key), None)
    asking.join(timeout=60)
    assert answer["status"] == 200 and 'id="tokens-chart"' in answer["html"]
    assert seen == []  # read what the other one stored: no second summary replay
    assert ReplayRun.objects.filter(session=session, key=settings.key).count() == 1


@pytest.mark.django_db
def test_without_a_lock_directory_replays_run_as_before(personas, long_session, settings,
                                                        tmp_path, summary_replays):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings.CTXSIM_LOCK_DIR = blocker / "locks"
    REPLAYS.clear()
    seen, _ = summary_replays
    page = reverse("session-detail", args=[long_session.pk]) + "?" + QUERY
    response = personas.client("viewer").get(page, headers=REPLAY)
    assert response.status_code == 200 and len(seen) == 1


def test_keys_share_a_bounded_set_of_lock_files(settings, tmp_path):
    settings.CTXSIM_LOCK_DIR = tmp_path
    files = {flight.lock_file(session, f"key-{n}") for session in range(40) for n in range(50)}
    assert len(files) <= flight.BUCKETS and all(f.parent == tmp_path for f in files)
    assert flight.lock_file(7, "k") == flight.lock_file(7, "k") != flight.lock_file(8, "k")
