"""Scale-out (SPEC §13): two web processes and two task workers sharing PostgreSQL and Redis.

A session uploaded through web process A is imported and replayed (its default-profile stats)
by whichever worker takes the job, then served by web process B: nothing one process needs
lives only in another. Runs where the database is PostgreSQL and Redis answers (`.ci/run`
runs tests/web against PostgreSQL); skipped with the reason elsewhere.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import io
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection

from ctxsim.generator import write_claude_code_jsonl
from ctxsim.transcripts.models import ImportJob, Session
from tests.conftest import password_for
from tests.shared import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

REDIS = ("127.0.0.1", 6379)
GUNICORN = Path(sys.executable).with_name("gunicorn")


def _redis_answers() -> bool:
    try:
        with socket.create_connection(REDIS, timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")


class Browser:
    """A cookie-keeping HTTP client that logs in and posts forms like a person would."""

    def __init__(self):
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, url: str) -> tuple[int, str]:
        with self.opener.open(url, timeout=30) as r:
            return r.status, r.read().decode()

    def csrf(self, url: str) -> str:
        _, html = self.get(url)
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)

    def post(self, url: str, body: bytes, content_type: str) -> tuple[int, str]:
        request = urllib.request.Request(url, data=body, headers={
            "Content-Type": content_type, "Referer": url})
        with self.opener.open(request, timeout=60) as r:
            return r.status, r.read().decode()

    def log_in(self, base: str, username: str) -> None:
        token = self.csrf(f"{base}/login/")
        form = urllib.parse.urlencode({"csrfmiddlewaretoken": token, "username": username,
                                       "password": password_for(username)}).encode()
        self.post(f"{base}/login/", form, "application/x-www-form-urlencoded")

    def upload(self, base: str, name: str, data: bytes) -> tuple[int, str]:
        token = self.csrf(f"{base}/uploads/")
        boundary = uuid.uuid4().hex
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="csrfmiddlewaretoken"\r\n\r\n'
            f"{token}\r\n".encode(),
            f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\n\r\n'.encode(),
            f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n",
            f"--{boundary}--\r\n".encode(),
        ]
        return self.post(f"{base}/uploads/", b"".join(parts),
                         f"multipart/form-data; boundary={boundary}")


@pytest.fixture
def stack(tmp_path, personas):
    if connection.vendor != "postgresql":
        pytest.skip("the scale-out test needs PostgreSQL (set DATABASE_URL; .ci/run does)")
    if not _redis_answers():
        pytest.skip(f"the scale-out test needs Redis on {REDIS[0]}:{REDIS[1]}")
    if not GUNICORN.exists():
        pytest.skip(f"gunicorn not found beside {sys.executable}")
    # The suite hashes passwords with a fast test hasher the servers do not know: these two log
    # in through the servers, so they get a real hash.
    for name in ("reviewer", "viewer"):
        user = personas.users[name]
        user.password = PBKDF2PasswordHasher().encode(password_for(name), "scaleoutsalt")
        user.save(update_fields=["password"])
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DEBUG": "false", "SECRET_KEY": "scale-out-test-" + uuid.uuid4().hex,
        "DATABASE_URL": (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or '127.0.0.1'}:"
                         f"{db['PORT'] or 5432}/{db['NAME']}"),
        "CACHE_URL": f"redis://{REDIS[0]}:{REDIS[1]}/7",
        "MEDIA_ROOT": str(tmp_path / "media"), "STATIC_ROOT": str(tmp_path / "static"),
        "ALLOWED_HOSTS": "127.0.0.1", "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false", "CTXSIM_BACKGROUND_IMPORT_BYTES": "1000",
        "CTXSIM_WARM_SESSIONS": "0", "PYTHONPATH": str(ROOT),
    }
    # The test's own settings point MEDIA_ROOT elsewhere; the stack shares one folder, as a
    # deployment shares one bucket.
    settings.MEDIA_ROOT = env["MEDIA_ROOT"]
    procs, ports = [], {}
    logs = tmp_path / "logs"
    logs.mkdir()
    files = contextlib.ExitStack()

    def log(name: str):
        return files.enter_context(open(logs / f"{name}.log", "wb"))

    try:
        for name in ("a", "b"):
            ports[name] = _free_port()
            procs.append(subprocess.Popen(
                [str(GUNICORN), "ctxsim.wsgi", "--bind", f"127.0.0.1:{ports[name]}",
                 "--workers", "1", "--threads", "2", "--timeout", "60"],
                cwd=ROOT, env=env, stdout=log(f"web-{name}"),
                stderr=subprocess.STDOUT))
        for name in ("w1", "w2"):
            procs.append(subprocess.Popen(
                [sys.executable, "manage.py", "db_worker", "--queue-name", "*", "--interval",
                 "0.2", "--no-reload", "--no-startup-delay", "--worker-id", name],
                cwd=ROOT, env=env, stdout=log(name),
                stderr=subprocess.STDOUT))
        for port in ports.values():
            _wait_for(lambda port=port: _answers(port), 60, f"gunicorn on port {port}")
        yield {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
        files.close()


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login/", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def test_a_session_uploaded_through_one_web_process_is_replayed_by_a_worker_and_served_by_the_other(
    stack, personas
):
    from django_tasks_db.models import DBTaskResult

    out = io.StringIO()
    write_claude_code_jsonl(out, 12, seed=5)
    data = out.getvalue().encode()
    assert len(data) > 1000  # large enough for the background import

    a, b = Browser(), Browser()
    a.log_in(stack["a"], "reviewer")
    b.log_in(stack["b"], "viewer")
    status, page = a.upload(stack["a"], "scale-out.jsonl", data)
    assert status == 200 and "scale-out.jsonl" in page, page[-3000:]

    job = _wait_for(lambda: ImportJob.objects.filter(file_name="scale-out.jsonl").first(), 30,
                    "the import job")
    job = _wait_for(lambda: ImportJob.objects.filter(pk=job.pk, status__in=["done", "failed"])
                    .first(), 120, "the import to finish")
    assert job.status == "done", job.message
    session = Session.objects.get(pk=job.session_ids[0])
    # The default profile's replay ran in the worker: the stats the list shows are stored.
    assert session.peak_raw_tokens and session.peak_sent_tokens
    workers = {w for r in DBTaskResult.objects.all() for w in r.worker_ids}
    assert workers and workers <= {"w1", "w2"}

    status, html = b.get(f"{stack['b']}/sessions/{session.pk}/")
    assert status == 200 and session.title in html.replace("&#x27;", "'")
    status, listing = b.get(f"{stack['b']}/")
    assert status == 200 and f"/sessions/{session.pk}/" in listing
    status, call = a.get(f"{stack['a']}/sessions/{session.pk}/?call=3")
    assert status == 200 and 'data-call="3"' in call


def test_each_kind_of_background_work_has_its_own_queue():
    from ctxsim.analysis.tasks import run_sweep
    from ctxsim.transcripts.tasks import run_import

    assert run_import.queue_name == "imports" and run_sweep.queue_name == "sweeps"
    assert set(settings.TASKS["default"]["QUEUES"]) >= {"imports", "replays", "sweeps"}
