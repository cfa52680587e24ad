"""Issue 27 (acceptance 2) and issue 28 items 6 and 12: uploads are idempotent under
concurrency — through the API and the upload page, threads against a live server — and the
upload page refuses a viewer before reading the body. Runs on SQLite and PostgreSQL."""

from __future__ import annotations

import io
import json
import re
import socket
import threading
import urllib.error
import urllib.request
from urllib.parse import urlsplit

import pytest
from django.db import connection
from django.test import Client
from django.urls import reverse

from ctxsim.api.models import ReceivedFile
from ctxsim.api.tokens import create_token
from ctxsim.generator import write_claude_code_jsonl
from ctxsim.transcripts.models import Session, UploadClaim

pytestmark = pytest.mark.django_db(transaction=True)


def transcript(seed: int, calls: int = 3) -> bytes:
    out = io.StringIO()
    write_claude_code_jsonl(out, calls, seed)
    return out.getvalue().encode()


def post(url: str, token: str, body: bytes, query: str = "") -> tuple[int, dict]:
    request = urllib.request.Request(
        f"{url}/api/v1/transcripts{query}", data=body, method="POST",
        headers={"Authorization": f"Bearer {token}",
                 "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def at_once(count: int, work) -> list:
    """Run `work(n)` in `count` threads released together; their results in order."""
    barrier = threading.Barrier(count)
    results: list = [None] * count

    def run(n: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[n] = work(n)
        except Exception as error:  # surfaced by the caller's assertions
            results[n] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return results


def test_eight_identical_posts_at_once_store_one_session(personas, live_server):
    _, token = create_token(personas.team, "race", "ingest")
    body = transcript(21)
    answers = at_once(8, lambda n: post(live_server.url, token, body))
    assert all(isinstance(a, tuple) for a in answers), answers
    statuses = sorted(status for status, _ in answers)
    assert statuses.count(201) == 1 and statuses.count(200) == 7, answers
    (session,) = Session.objects.filter(team=personas.team)
    for status, answer in answers:
        assert [s["id"] for s in answer["sessions"]] == [session.pk]
        assert answer["outcome"] == ("new" if status == 201 else "existing")
    assert ReceivedFile.objects.count() == 1 and not UploadClaim.objects.exists()


def test_four_files_of_one_session_key_at_once_leave_one_uploads_sessions(personas,
                                                                          live_server):
    _, token = create_token(personas.team, "race", "ingest")
    bodies = [transcript(30 + n, calls=2 + n) for n in range(4)]
    answers = at_once(4, lambda n: post(live_server.url, token, bodies[n],
                                        "?session_key=run-1"))
    assert all(isinstance(a, tuple) and a[0] in (200, 201) for a in answers), answers
    records = ReceivedFile.objects.filter(session_key="run-1")
    assert records.count() == 4
    (current,) = records.filter(current=True)
    assert current.pk == max(r.pk for r in records)  # the newest upload wins
    stored = set(Session.objects.filter(team=personas.team).values_list("pk", flat=True))
    assert stored == set(current.sessions.values_list("pk", flat=True)) and stored
    # An upload a newer one beat while it settled answers 200 with the newer one's sessions;
    # one that settled before the newer ones arrived answered 201 with its own (replaced since).
    for status, answer in answers:
        expected = 200 if answer["outcome"] == "superseded" else 201
        assert status == expected and answer["outcome"] in ("new", "replaced", "superseded")
        assert answer["sessions"]


def _page_post(user, body: bytes, name: str) -> int:
    client = Client()
    client.force_login(user)
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(reverse("upload"), {"files": [SimpleUploadedFile(name, body)]})
    return response.status_code


def test_the_upload_page_twice_at_once_stores_one_session(personas, live_server):
    body = transcript(44)
    owner = personas.users["owner"]
    answers = at_once(2, lambda n: _page_post(owner, body, "same.jsonl"))
    assert answers == [302, 302], answers
    assert Session.objects.filter(team=personas.team, source_name="same.jsonl").count() == 1
    assert not UploadClaim.objects.exists()


def test_the_page_and_the_api_know_each_others_bytes(personas, live_server):
    _, token = create_token(personas.team, "mix", "ingest")
    body = transcript(45)
    assert post(live_server.url, token, body)[0] == 201
    _page_post(personas.users["owner"], body, "again.jsonl")
    assert Session.objects.filter(team=personas.team).count() == 1


def _raw_upload(url: str, cookie: str, csrf: str, declared: int) -> bytes:
    """Send the headers of a `declared`-byte multipart upload and 64 KB of it, then read."""
    parts = urlsplit(url)
    boundary = "ctxsimboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; "
            f"filename=\"big.jsonl\"\r\nContent-Type: application/octet-stream\r\n\r\n")
    with socket.create_connection((parts.hostname, parts.port), timeout=15) as sock:
        sock.sendall((
            f"POST /uploads/ HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
            f"Content-Length: {declared}\r\nCookie: {cookie}\r\nX-CSRFToken: {csrf}\r\n"
            f"Referer: {url}/uploads/\r\n\r\n{head}").encode() + b"x" * 65536)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                answer += chunk
        except TimeoutError:
            pass  # still waiting for the body: the server is reading it
        return answer


def test_a_viewers_big_upload_is_refused_before_the_body_is_read(personas, live_server):
    client = Client()
    client.force_login(personas.users["viewer"])
    client.get(reverse("upload"))
    cookie = "; ".join(f"{k}={v.value}" for k, v in client.cookies.items())
    csrf = client.cookies["csrftoken"].value if "csrftoken" in client.cookies else "x"
    answer = _raw_upload(live_server.url, cookie, csrf, 50 * 1024 * 1024)
    assert re.match(rb"HTTP/1\.[01] 403 ", answer), answer[:200]
    assert not Session.objects.exists()


def test_an_owners_upload_still_needs_the_csrf_token(personas):
    client = Client(enforce_csrf_checks=True)
    client.force_login(personas.users["owner"])
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = client.post(reverse("upload"),
                           {"files": [SimpleUploadedFile("a.jsonl", transcript(46))]})
    assert response.status_code == 403 and not Session.objects.exists()
    client.get(reverse("upload"))
    response = client.post(reverse("upload"), {
        "files": [SimpleUploadedFile("a.jsonl", transcript(46))],
        "csrfmiddlewaretoken": client.cookies["csrftoken"].value})
    assert response.status_code == 302 and Session.objects.count() == 1


def test_a_claim_held_too_long_is_a_503_and_a_dead_ones_claim_is_taken_over(
    personas, monkeypatch
):
    import hashlib
    from datetime import timedelta

    from django.utils import timezone

    from ctxsim.transcripts import claims
    from tests.factories import bearer

    _, token = create_token(personas.team, "busy", "ingest")
    body = transcript(47)
    claim = UploadClaim.objects.create(team=personas.team,
                                       sha256=hashlib.sha256(body).hexdigest())

    def send():
        return Client().post("/api/v1/transcripts", data=body,
                             content_type="application/octet-stream", **bearer(token))

    with monkeypatch.context() as patched:
        real = claims.claimed
        patched.setattr(claims, "claimed", lambda team, sha: real(team, sha, wait_seconds=0.3))
        busy = send()
    assert busy.status_code == 503 and busy["Retry-After"] == "5"
    assert "being imported by another upload" in busy.json()["detail"]
    assert not Session.objects.exists()
    # The claim of a process that died (older than the import timeout) is taken over.
    UploadClaim.objects.filter(pk=claim.pk).update(
        created_at=timezone.now() - timedelta(hours=1))
    assert send().status_code == 201 and Session.objects.count() == 1
    assert not UploadClaim.objects.exists()
