"""Issue 28 item 5: `ctxsim-push` never sends the token to another origin, never hangs (a
FIFO, a silent or trickling server: a total deadline), sends only regular transcript files,
and streams a big file in bounded memory. Real processes against real sockets."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.web.test_capture import SilentServer
from tests.web.test_hooks import PUSH, push_env

TOKEN = "ctx_secret_token_for_tests"


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every POST as `answer` says; records each request's headers and body size."""

    answer: tuple[int, dict, bytes] = (201, {}, b'{"sessions": []}')
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        received = 0
        while received < length:
            received += len(self.rfile.read(min(1 << 20, length - received)))
        type(self).seen.append({"headers": dict(self.headers), "size": received})
        status, headers, body = type(self).answer
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def serve(answer) -> tuple[http.server.ThreadingHTTPServer, type[Recorder]]:
    handler = type("Handler", (Recorder,), {"answer": answer, "seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


def url_of(server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def transcript(path: Path) -> Path:
    path.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n')
    return path


def push(args, url, tmp_path, timeout="5"):
    env = push_env(url, TOKEN, tmp_path / "home", CTXSIM_TIMEOUT=timeout)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-S", str(PUSH), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - started


def test_a_redirect_to_another_origin_never_gets_the_token(tmp_path):
    other, other_seen = serve((201, {}, b'{"sessions": []}'))
    redirect, seen = serve((302, {"Location": f"{url_of(other)}/api/v1/transcripts"}, b""))
    try:
        done, _ = push([transcript(tmp_path / "s.jsonl")], url_of(redirect), tmp_path)
        assert done.returncode == 1 and "another origin" in done.stderr
        assert len(seen.seen) == 1 and seen.seen[0]["headers"]["Authorization"].endswith(TOKEN)
        assert other_seen.seen == []
    finally:
        other.shutdown()
        redirect.shutdown()


def test_a_silent_or_trickling_server_cannot_hold_it_past_the_deadline(tmp_path):
    silent = SilentServer()
    trickle = socket.socket()
    trickle.bind(("127.0.0.1", 0))
    trickle.listen(4)
    stop = threading.Event()

    def drip() -> None:
        conn, _ = trickle.accept()
        conn.recv(65536)
        while not stop.is_set():
            try:
                conn.sendall(b"H")  # one byte of a status line every 0.2 s, forever
            except OSError:
                return
            time.sleep(0.2)

    threading.Thread(target=drip, daemon=True).start()
    try:
        for url in (silent.url, f"http://127.0.0.1:{trickle.getsockname()[1]}"):
            done, elapsed = push([transcript(tmp_path / "s.jsonl")], url, tmp_path, "2")
            assert done.returncode == 1 and "deadline" in done.stderr, done.stderr
            assert elapsed < 8, f"{url}: {elapsed:.1f} s"
    finally:
        stop.set()
        silent.stop()
        trickle.close()


def test_only_regular_transcript_files_are_sent(tmp_path):
    server, seen = serve((201, {}, b'{"sessions": []}'))
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    (tmp_path / ".ssh").mkdir()
    key = tmp_path / "id_rsa"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    pem = transcript(tmp_path / "server.pem")
    secret = tmp_path / "secret.txt"
    secret.write_text("{not really}")
    link = tmp_path / "link.jsonl"
    link.symlink_to(transcript(tmp_path.parent / f"{tmp_path.name}-outside.jsonl"))
    disguised = tmp_path / "notes.jsonl"
    disguised.write_text("-----BEGIN RSA PRIVATE KEY-----\n")
    plain = tmp_path / "notes.txt.jsonl"
    plain.write_text("hello, not json\n")
    try:
        for path, why in ((fifo, "not a regular file"), (key, "key"), (pem, "key"),
                          (link, "symlink out of the agent's folders"),
                          (disguised, "private key"), (plain, "not JSON")):
            done, elapsed = push([path], url_of(server), tmp_path)
            assert done.returncode == 1 and why in done.stderr, (path, done.stderr)
            assert elapsed < 5
        assert seen.seen == []
        # A symlink inside the agent's folder is followed.
        inside = tmp_path / "home" / ".claude" / "projects" / "p" / "real.jsonl"
        inside.parent.mkdir(parents=True)
        transcript(inside)
        (inside.parent / "alias.jsonl").symlink_to(inside)
        done, _ = push([inside.parent / "alias.jsonl"], url_of(server), tmp_path)
        assert done.returncode == 0 and len(seen.seen) == 1, done.stderr
    finally:
        server.shutdown()


def test_a_big_file_is_sent_in_bounded_memory(tmp_path):
    server, seen = serve((201, {}, b'{"sessions": []}'))
    big = tmp_path / "big.jsonl"
    line = json.dumps({"type": "user", "message": {"content": "x" * 4000}}) + "\n"
    with big.open("w") as out:
        for n in range(48_000):  # ~190 MB
            out.write(line.replace("xxxx", f"{n:04d}", 1))
    env = push_env(url_of(server), TOKEN, tmp_path / "home", CTXSIM_TIMEOUT="120")
    # Measured from a small parent: a child forked from pytest itself starts with its pages.
    measure = ("import resource, subprocess, sys; "
               "code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL); "
               "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    done = subprocess.run([sys.executable, "-S", "-c", measure, sys.executable, "-S",
                           str(PUSH), str(big)], env=env, capture_output=True, text=True,
                          timeout=300)
    code, peak_kb = map(int, done.stdout.split())
    try:
        assert code == 0 and seen.seen and seen.seen[0]["size"] > 0, done.stderr
        assert peak_kb < 48 * 1024, f"{peak_kb / 1024:.0f} MB"  # ru_maxrss is in KB on Linux
    finally:
        server.shutdown()


@pytest.mark.parametrize("answer", [(500, {}, b"{}"), (401, {}, b'{"detail": "bad token"}')])
def test_a_transient_refusal_stays_spooled(tmp_path, answer):
    server, _ = serve(answer)
    home = tmp_path / "home"
    path = transcript(tmp_path / "s.jsonl")
    env = push_env(url_of(server), TOKEN, home)
    try:
        subprocess.run([sys.executable, "-S", str(PUSH), "--hook", "codex"], env=env,
                       input=json.dumps({"session_id": "x", "transcript_path": str(path)}),
                       capture_output=True, text=True, timeout=30)
        from tests.web.test_hooks import wait_for_uploader

        wait_for_uploader(home / "spool")
        (job,) = (home / "spool" / "jobs").glob("*.json")
        state = json.loads(job.read_text())
        assert state["attempts"] == 1 and state["next_at"] > time.time()
        assert not list((home / "spool" / "failed").glob("*.json"))
    finally:
        server.shutdown()


def test_a_job_spooled_again_while_it_was_being_sent_is_kept(tmp_path):
    """The hook never waits for an uploader's lock: when it spools the file again during a
    send (the session went on), the newer job stays for the next run."""
    home = tmp_path / "home"
    path = transcript(tmp_path / "s.jsonl")
    jobs = home / "spool" / "jobs"

    class Respool(Recorder):
        seen: list[dict] = []

        def do_POST(self):  # noqa: N802
            (job,) = jobs.glob("*.json")
            state = json.loads(job.read_text())
            job.write_text(json.dumps({**state, "created_at": state["created_at"] + 1}))
            super().do_POST()

    Respool.answer = (201, {}, b'{"sessions": []}')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Respool)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = push_env(url_of(server), TOKEN, home, CTXSIM_LINGER_SECONDS="0")
    try:
        subprocess.run([sys.executable, "-S", str(PUSH), "--hook", "codex"], env=env,
                       input=json.dumps({"session_id": "x", "transcript_path": str(path)}),
                       capture_output=True, text=True, timeout=30)
        from tests.web.test_hooks import wait_for_uploader

        wait_for_uploader(home / "spool")
        assert len(Respool.seen) == 1
        (job,) = jobs.glob("*.json")  # the newer one, not deleted with the one sent
        assert json.loads(job.read_text())["attempts"] == 0
    finally:
        server.shutdown()
