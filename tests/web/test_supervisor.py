"""Issue 28 item 3, acceptance 4: `make run` (bin/run-dev) and `make serve-prod`
(bin/serve-prod) survive their task workers. Each script is started for real on a free port
(on SQLite: serve-prod takes DATABASE_URL from the environment, and gunicorn serves SQLite as
well), one worker is killed with `kill -9`, and the web server keeps answering while a new
worker for the same queue is running within 10 s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from loadtest.run import free_port
from tests.web.workers import ROOT, wait_for

PROD_KEY = "test-supervisor-secret-key-0123456789abcdef0123456789abcdef"



def children(pid: int) -> dict[int, str]:
    """The direct children of `pid`, by their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent == pid:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
    return found


def workers_of(pid: int) -> dict[int, str]:
    return {child: line for child, line in children(pid).items() if "ctxsim_worker" in line}


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
            return response.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("script", ["run-dev", "serve-prod"])
def test_killing_a_worker_leaves_the_web_server_up_and_a_new_worker_running(script,
                                                                             tmp_path):
    port = free_port()
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
           "MEDIA_ROOT": str(tmp_path / "media"), "STATIC_ROOT": str(tmp_path / "static"),
           "SECRET_KEY": PROD_KEY, "HOST": "127.0.0.1", "PORT": str(port),
           "WEB_CONCURRENCY": "1", "CACHE_URL": f"filecache://{tmp_path}/cache",
           "CTXSIM_WARM_SESSIONS": "0", "CTXSIM_ADMIN_PASSWORD": "supervisor-test-pw",
           "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if script == "run-dev":  # `make run` migrates before it starts the script
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                       cwd=ROOT, env=env, check=True, timeout=300)
    log = (tmp_path / "out.log").open("wb")
    stack = subprocess.Popen(["bash", str(ROOT / "bin" / script)], cwd=ROOT, env=env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/login/"
    try:
        wait_for(lambda: answers(url), 120, "the web server to answer", stack)
        wait_for(lambda: len(workers_of(stack.pid)) == 3, 30, "three workers", stack)
        before = workers_of(stack.pid)
        victim, line = next((p, c) for p, c in before.items() if "replays" in c)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        new = wait_for(lambda: [p for p, c in workers_of(stack.pid).items()
                                if p != victim and p not in before and c == line], 10,
                       "a new replays worker", stack)
        assert time.monotonic() - killed_at < 10 and new
        assert answers(url), "the web server stopped with its worker"
        assert stack.poll() is None
    finally:
        if stack.poll() is None:
            os.killpg(stack.pid, signal.SIGTERM)
        try:
            stack.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)
            stack.wait(timeout=30)
        log.close()
    output = (tmp_path / "out.log").read_text(errors="replace")
    assert "killed by SIGKILL; starting it again in 1 s" in output, output[-3000:]
