"""Issue 20 item 13: spilled files in storage are whole or absent, whatever the disk does."""

from __future__ import annotations

import hashlib
import io
import os
import resource
import signal
from contextlib import contextmanager

import pytest
from django.core.files.storage import default_storage

from ctxsim.replays.models import storage_name_for
from ctxsim.replays.spills import StorageSpillSink

DATA = b"line of a spilled build log\n" * 2000


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return tmp_path / "media"


def stored_bytes() -> bytes:
    with default_storage.open(storage_name_for(hashlib.sha256(DATA).hexdigest()), "rb") as fh:
        return fh.read()


def test_a_truncated_spill_left_in_storage_is_written_again(media):
    """issue 20 item 13: a full disk left a 0-byte file that later replays trusted, because
    the sink checked only that the name exists."""
    name = storage_name_for(hashlib.sha256(DATA).hexdigest())
    default_storage.save(name, io.BytesIO(b""))
    assert default_storage.size(name) == 0
    StorageSpillSink().write("/d", "budget_a_1.txt", DATA)
    assert stored_bytes() == DATA
    assert sorted(p.name for p in (media / os.path.dirname(name)).iterdir()) == [
        os.path.basename(name)]


@contextmanager
def disk_full_after(size: int):
    """Writes past `size` bytes of a file fail as on a full disk (RLIMIT_FSIZE: EFBIG)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_a_write_that_fails_half_way_leaves_no_file_behind(media):
    """issue 20 item 13: written to a temporary name and renamed, removed on error: the next
    replay finds nothing and writes the whole file."""
    with disk_full_after(1000), pytest.raises(OSError):
        StorageSpillSink().write("/d", "budget_a_1.txt", DATA)
    assert [p for p in media.rglob("*") if p.is_file()] == []
    StorageSpillSink().write("/d", "budget_a_1.txt", DATA)
    assert stored_bytes() == DATA


def test_an_upload_the_disk_cannot_hold_leaves_no_file_and_says_so(personas, media, settings,
                                                                    monkeypatch):
    """issue 20 item 13: a full disk left an orphaned partial upload file with no job row
    (and a 500); now the file is removed and the page says what went wrong."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from ctxsim.transcripts.models import ImportJob
    from tests.factories import claude_code_bytes

    settings.CTXSIM_BACKGROUND_IMPORT_BYTES = 1000  # goes to the worker: stored first
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 2**20  # kept in memory, written by storage
    save = default_storage.save

    def save_on_a_full_disk(name, content, *args, **kwargs):
        with disk_full_after(4096):
            return save(name, content, *args, **kwargs)

    monkeypatch.setattr(default_storage, "save", save_on_a_full_disk)
    data = claude_code_bytes(40)
    assert len(data) > 4096
    response = personas.client("owner").post(reverse("upload"), {
        "files": [SimpleUploadedFile("big.jsonl", data)]}, follow=True)
    assert response.status_code == 200
    assert "could not be stored" in response.content.decode()
    assert not ImportJob.objects.exists()
    assert [p for p in media.rglob("*") if p.is_file()] == []


def test_letting_go_of_spilled_bytes_keeps_every_held_call_naming_its_own_files():
    """A summary replay holds the landing call twice (asked for, and in the window around the
    peak). Its records were matched by id, and a freed heavy record's id went to the next
    light one: the second pass named another call's spill (call 20 showed call 17's file)."""
    from types import SimpleNamespace

    from ctxsim.pipeline.spill import SpillRecord
    from ctxsim.replays.spills import drop_contents

    records = [SpillRecord(f"budget_{n}.txt", f"/d/budget_{n}.txt", n, b"x" * 100)
               for n in range(400)]
    calls = [SimpleNamespace(spills=[records[n]]) for n in range(0, 400, 3)]
    replay = SimpleNamespace(spills=SimpleNamespace(records=records))
    names = [[r.name for r in c.spills] for c in calls]
    held = [c for call in calls for c in (call, call)]  # each call held twice
    del records  # as the replay holds them: only through its list and the calls
    drop_contents(replay, held)
    assert [[r.name for r in c.spills] for c in calls] == names
    assert all(not r.content for c in calls for r in c.spills)
