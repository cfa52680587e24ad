"""Issue 27: captured from every machine, never lost. `ctxsim-push` as real processes against a
real listening socket and the live server: the hook returns at once and the spool delivers
later (acceptance 1), `--backfill` over a `~/.claude/projects`-shaped tree (acceptance 3),
`--watch`, `failed/`, and subagent files linked to their parent session."""

from __future__ import annotations

import json
import socket
import stat
import subprocess
import sys
import threading
import time
from io import StringIO
from pathlib import Path

import pytest
from django.test import Client

from ctxsim import importers
from ctxsim.api.tokens import create_token
from ctxsim.generator import write_claude_code_jsonl
from ctxsim.transcripts.models import Session
from tests.factories import bearer
from tests.web.test_hooks import PUSH, push_env, wait_for_uploader

pytestmark = pytest.mark.django_db(transaction=True)


def claude_file(path: Path, seed: int, *, session_id: str, cwd: str, calls: int = 3,
                agent: str = "") -> Path:
    """A generated Claude Code transcript as `session_id` in `cwd` (a subagent's when `agent`)."""
    out = StringIO()
    write_claude_code_jsonl(out, calls, seed)
    lines = []
    for line in out.getvalue().splitlines():
        record = json.loads(line)
        if record.get("type") == "summary":
            continue
        record.update(sessionId=session_id, cwd=cwd)
        if agent:
            record.update(isSidechain=True, agentId=agent)
        lines.append(json.dumps(record))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


class SilentServer:
    """Accepts connections and never answers (kept open until stopped)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def stop(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


def test_the_hook_returns_at_once_from_a_silent_server_and_flush_delivers_later(
    personas, live_server, tmp_path
):
    """Acceptance 1."""
    _, token = create_token(personas.team, "laptop", "ingest")
    home = tmp_path / "home"
    main = claude_file(home / ".claude" / "projects" / "-work-app" / "s1.jsonl", 61,
                       session_id="s1", cwd="/work/app", calls=4)
    silent = SilentServer()
    try:
        env = push_env(silent.url, token, home, CTXSIM_TIMEOUT="3")
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-S", str(PUSH), "--hook", "claude-code"], env=env,
            input=json.dumps({"session_id": "s1", "transcript_path": str(main),
                              "cwd": "/work/app", "hook_event_name": "SessionEnd"}),
            capture_output=True, text=True, timeout=30)
        elapsed = time.monotonic() - started
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert elapsed < 1.5, f"the hook took {elapsed:.2f} s"
        spool = home / "spool"
        assert stat.S_IMODE(spool.stat().st_mode) == 0o700
        (job,) = (spool / "jobs").glob("*.json")
        assert stat.S_IMODE(job.stat().st_mode) == 0o600 and token not in job.read_text()
        wait_for_uploader(spool)  # it gave up on the silent server after CTXSIM_TIMEOUT
        assert json.loads(job.read_text())["attempts"] == 1
        assert not Session.objects.exists()
    finally:
        silent.stop()
    flushed = subprocess.run([sys.executable, "-S", str(PUSH), "--flush"],
                             env=push_env(live_server.url, token, home), capture_output=True,
                             text=True, timeout=60)
    assert flushed.returncode == 0, flushed.stderr
    assert "imported, 1 session(s)" in flushed.stderr
    assert not list((home / "spool" / "jobs").glob("*.json"))
    session = Session.objects.get()
    expected = importers.load(main).sessions[0]
    assert session.message_count == len(expected.messages)
    assert session.tool_call_count == expected.tool_call_count > 0
    assert session.tool_result_count == expected.tool_result_count
    assert session.origin == {"host": session.origin_host, "cwd": "/work/app",
                              "agent": "claude-code", "agent_version": "2.0.30"}
    assert session.origin_host


def test_a_file_the_server_refuses_goes_to_failed_with_its_message(personas, live_server,
                                                                   tmp_path):
    _, token = create_token(personas.team, "laptop", "ingest")
    home = tmp_path / "home"
    bad = home / "bad.jsonl"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"type": "user", "nothing": 1}\n')
    env = push_env(live_server.url, token, home)
    subprocess.run([sys.executable, "-S", str(PUSH), "--hook", "codex"], env=env, timeout=30,
                   input=json.dumps({"session_id": "c1", "transcript_path": str(bad)}),
                   capture_output=True, text=True)
    wait_for_uploader(home / "spool")
    (failed,) = (home / "spool" / "failed").glob("*.json")
    record = json.loads(failed.read_text())
    assert record["path"] == str(bad) and ": 400 " in record["error"]
    assert not list((home / "spool" / "jobs").glob("*.json"))


def test_a_transcript_still_being_written_waits_for_a_later_try(personas, live_server,
                                                                tmp_path):
    _, token = create_token(personas.team, "laptop", "ingest")
    home = tmp_path / "home"
    main = claude_file(home / "s2.jsonl", 62, session_id="s2", cwd="/w")
    text = main.read_text()
    main.write_text(text[: len(text) - 40])  # the last line is not finished
    env = push_env(live_server.url, token, home)
    subprocess.run([sys.executable, "-S", str(PUSH), "--hook", "claude-code"], env=env,
                   input=json.dumps({"session_id": "s2", "transcript_path": str(main)}),
                   capture_output=True, text=True, timeout=30)
    wait_for_uploader(home / "spool")
    assert not Session.objects.exists()
    assert "still being written" in (home / "spool" / "uploader.log").read_text()
    main.write_text(text)
    flushed = subprocess.run([sys.executable, "-S", str(PUSH), "--flush"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert flushed.returncode == 0 and Session.objects.count() == 1, flushed.stderr


def claude_tree(home: Path) -> dict[str, Path]:
    """Two projects as Claude Code lays them out: a session with a nested subagent, and one
    with a subagent file beside it whose name sorts first (it is sent before its parent)."""
    projects = home / ".claude" / "projects"
    a = "aaaaaaaa-0000-4000-8000-000000000001"
    b = "ffffffff-0000-4000-8000-000000000002"
    return {
        "a": claude_file(projects / "-home-u-alpha" / f"{a}.jsonl", 71, session_id=a,
                         cwd="/home/u/alpha"),
        "a-agent": claude_file(projects / "-home-u-alpha" / a / "subagents" / "agent-x1.jsonl",
                               72, session_id=a, cwd="/home/u/alpha", agent="x1"),
        "b": claude_file(projects / "-home-u-beta" / f"{b}.jsonl", 73, session_id=b,
                         cwd="/home/u/beta"),
        "b-agent": claude_file(projects / "-home-u-beta" / "agent-y2.jsonl", 74, session_id=b,
                               cwd="/home/u/beta", agent="y2"),
    }


def test_backfill_sends_each_transcript_once_with_parents_and_origins(personas, live_server,
                                                                      tmp_path):
    """Acceptance 3."""
    _, token = create_token(personas.team, "laptop", "ingest,read")
    home = tmp_path / "home"
    files = claude_tree(home)
    env = push_env(live_server.url, token, home)
    first = subprocess.run([sys.executable, "-S", str(PUSH), "--backfill"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "4/4 files, 4 sent, 0 sent before" in first.stderr
    assert Session.objects.count() == 4
    by_name = {s.source_name: s for s in Session.objects.all()}
    for main, agent in (("a", "a-agent"), ("b", "b-agent")):
        parent, child = by_name[files[main].name], by_name[files[agent].name]
        assert child.parent_id == parent.pk and parent.parent_id is None
    client = Client()
    for key, path in files.items():
        session = by_name[path.name]
        detail = client.get(f"/api/v1/sessions/{session.pk}", **bearer(token)).json()
        cwd = "/home/u/alpha" if key.startswith("a") else "/home/u/beta"
        assert detail["origin"]["cwd"] == cwd and detail["origin"]["agent"] == "claude-code"
        assert detail["origin"]["host"]
    listed = client.get("/api/v1/sessions?project=beta", **bearer(token)).json()
    assert [r["id"] for r in listed["results"]] == [by_name[files["b"].name].pk]
    second = subprocess.run([sys.executable, "-S", str(PUSH), "--backfill"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0 and "4/4 files, 0 sent, 4 sent before" in second.stderr
    assert Session.objects.count() == 4


def test_watch_sends_a_session_once_it_is_quiet(personas, live_server, tmp_path):
    _, token = create_token(personas.team, "laptop", "ingest")
    home = tmp_path / "home"
    folder = home / "sessions"
    claude_file(folder / "cccccccc-0000-4000-8000-000000000003.jsonl", 75,
                session_id="cccccccc-0000-4000-8000-000000000003", cwd="/w")
    watcher = subprocess.Popen([sys.executable, "-S", str(PUSH), "--watch", str(folder),
                                "--quiet", "1"], env=push_env(live_server.url, token, home),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not Session.objects.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert Session.objects.count() == 1
        time.sleep(3)  # a few more rounds: nothing is sent twice
        assert Session.objects.count() == 1
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)


def test_a_subagent_pushed_before_its_parent_is_linked_when_the_parent_arrives(
    personas, live_server, tmp_path
):
    _, token = create_token(personas.team, "laptop", "ingest")
    home = tmp_path / "home"
    main = claude_file(home / "p1.jsonl", 81, session_id="p1", cwd="/w")
    agent = claude_file(home / "agent-z9.jsonl", 82, session_id="p1", cwd="/w", agent="z9")
    env = push_env(live_server.url, token, home)
    for path, key in ((agent, "p1:agent-z9"), (main, "p1")):
        done = subprocess.run([sys.executable, "-S", str(PUSH), "--session-key", key,
                               str(path)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    child, parent = (Session.objects.get(source_name=p.name) for p in (agent, main))
    assert child.parent_id == parent.pk
    # The session ends again after a resume: its newer transcript replaces the old one, and
    # the subagent moves under the new session instead of going with the old.
    claude_file(main, 83, session_id="p1", cwd="/w", calls=5)
    done = subprocess.run([sys.executable, "-S", str(PUSH), "--session-key", "p1", str(main)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    newer = Session.objects.get(source_name=main.name)
    assert newer.pk != parent.pk
    child.refresh_from_db()
    assert child.parent_id == newer.pk
