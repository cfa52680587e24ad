"""`make loadtest`: SPEC §9's load against the production stack on loopback.

    python -m loadtest.run [--users 50] [--duration 60] [--sessions 20] [--calls 200]

1. Recreates the dedicated load database (`ctxsim_load` on the server of DATABASE_URL, default
   postgres://ctxsim:ctxsim@127.0.0.1:5432/ctxsim; override the whole URL with
   LOADTEST_DATABASE_URL, whose database name must end in `_load`): it never touches dev data.
2. Seeds it (`loadtest.seed`): reviewers of one team, generated sessions, default replays.
3. Starts `bin/serve-prod` (gunicorn workers + the task worker) on a free loopback port.
4. Runs USERS simulated reviewers for DURATION seconds, each with 1–3 s think time between
   actions: browsing the sessions list, opening a session, stepping calls, changing a threshold
   (the htmx replay request) and commenting (only when the team-review feature exists).
   An answer the worker has to complete (a session past CTXSIM_INLINE_REPLAY_CALLS, e.g.
   `--calls 2000`: a status element polling its job) is followed as the page follows it:
   each poll a request of its own ("poll"), then the region loaded; how long the action
   waited for its result is reported beside the requests (it was the status answers alone).
5. Stops the stack, prints errors, p50 and p95 per action, overall and per 10-second window,
   and exits 1 on any error (an answer outside 2xx/3xx, a failed connection, or one slower than
   10 s) or when any 10-second window's p95 is above 1 s (SPEC §9, issue 21).
"""

from __future__ import annotations

import argparse
import html
import http.client
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import string
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
DEFAULT_DATABASE_URL = "postgres://ctxsim:ctxsim@127.0.0.1:5432/ctxsim"
SLOW = 10.0  # seconds: slower than this is an error (SPEC §9)
# Values reviewers try for ChatCLI's per-result cap: a shared handful, as people round numbers.
THRESHOLDS = (4000, 6000, 8000, 10000, 12000, 16000)
# action -> weight (share of a reviewer's actions)
ACTIONS = {"list": 2, "open": 2, "step": 4, "threshold": 2, "comment": 1}
# A region the worker fills answers with a status element that polls its job (templates/jobs/
# poll.html); once the job ended, the answer loads the region (or refreshes the page). The
# reviewer follows it as the browser does, each poll a request of its own ("poll").
POLLING = re.compile(rb'<div class="job-poll"[^>]*? hx-get="([^"]+)" hx-trigger="every (\d+)s"')
ENDED = re.compile(rb'<div class="job-poll job-ended"[^>]*? hx-get="([^"]+)" hx-trigger="load"')


def log(text: str) -> None:
    print(f"loadtest: {text}", flush=True)


# --- database -----------------------------------------------------------------------------------


def load_database_url() -> str:
    explicit = os.environ.get("LOADTEST_DATABASE_URL")
    if explicit:
        url = explicit
    else:
        base = urlsplit(os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL)
        if not base.scheme.startswith(("postgres", "pgsql")):
            base = urlsplit(DEFAULT_DATABASE_URL)  # the load test always runs on PostgreSQL
        url = urlunsplit(base._replace(path="/ctxsim_load"))
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not parts.scheme.startswith(("postgres", "pgsql")) or not name.endswith("_load"):
        raise SystemExit(f"loadtest: {url!r} must be a PostgreSQL URL whose database name ends "
                         "in _load (it is dropped and recreated)")
    return url


def recreate_database(url: str) -> None:
    """Drop and create the load database: as its owner role when it may create databases,
    else as the `postgres` superuser through psql, after `bin/pg-ensure` has made the role
    (as .ci/run does)."""
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    statements = [f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)',
                  f'CREATE DATABASE "{name}" OWNER "{parts.username}"']
    try:
        admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            for sql in statements:
                conn.execute(sql)
        return
    except psycopg.Error as exc:
        log(f"as {parts.username}: {str(exc).strip()}; trying psql as postgres")
    # A fresh machine has no ctxsim role yet (only .ci/run made it before): start the server
    # if needed and create the role, as bin/pg-ensure does for CI.
    env = dict(os.environ, PGHOST=parts.hostname or "127.0.0.1", PGPORT=str(parts.port or 5432))
    subprocess.run([str(ROOT / "bin" / "pg-ensure"), parts.username or "ctxsim"], env=env,
                   check=True)
    for sql in statements:
        subprocess.run(
            ["psql", "-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 5432),
             "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-qc", sql],
            check=True,
        )


# --- the stack ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"loadtest: bin/serve-prod exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/login/")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"loadtest: the server did not answer on port {port} in {timeout:.0f}s")


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to serve-prod's process group (gunicorn, its workers and the task worker)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


# --- the reviewers -----------------------------------------------------------------------------


@dataclass
class Sample:
    action: str
    seconds: float
    status: int
    error: str = ""
    sent_at: float = 0.0  # time.monotonic() when the request was sent


@dataclass
class Reviewer:
    number: int
    port: int
    cookie: str
    sessions: list[dict]
    comments: bool
    deadline: float
    samples: list[Sample] = field(default_factory=list)

    # (action, seconds from its request until its region held the result) for the actions
    # answered by a status element the reviewer polled (work the worker did meanwhile)
    waits: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(1000 + self.number)
        self.csrf = "".join(self.rng.choices(string.ascii_letters + string.digits, k=32))
        self.conn: http.client.HTTPConnection | None = None
        self.session = self.rng.choice(self.sessions)
        self.call = self.rng.randrange(self.session["calls"])
        self.threshold: int | None = None

    def request(self, action: str, method: str, path: str, *, body: str | None = None,
                headers: dict[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
        """Send one request and record it; its body and headers (empty on an error)."""
        all_headers = {"Cookie": f"sessionid={self.cookie}; csrftoken={self.csrf}",
                       "User-Agent": f"ctxsim-loadtest/{self.number}", **(headers or {})}
        if body is not None:
            all_headers["Content-Type"] = "application/x-www-form-urlencoded"
            all_headers["X-CSRFToken"] = self.csrf
        start = time.perf_counter()
        sent_at = time.monotonic()
        status, error, content, answer_headers = 0, "", b"", {}
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            self.conn.request(method, path, body=body, headers=all_headers)
            response = self.conn.getresponse()
            content = response.read()
            answer_headers = {k.lower(): v for k, v in response.getheaders()}
            status = response.status
            if response.getheader("Connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
            if self.conn is not None:
                self.conn.close()
            self.conn = None
        seconds = time.perf_counter() - start
        if not error and not 200 <= status < 400:
            error = f"HTTP {status}"
        elif not error and seconds > SLOW:
            error = f"slow ({seconds:.1f}s)"
        self.samples.append(Sample(action, seconds, status, error, sent_at))
        if error:
            log(f"reviewer {self.number}: {action} {method} {path}: {error}")
            return b"", {}
        return content, answer_headers

    def follow(self, action: str, path: str, target: str, answer: tuple[bytes, dict[str, str]],
               started: float) -> None:
        """Poll a status element in `answer` until the region `target` of page `path` holds
        the result, as the page's htmx does; record how long the action waited for it."""
        content, headers = answer
        polled = False
        page = f"http://127.0.0.1:{self.port}{path}"
        for _ in range(600):  # bounded; the deadline ends it first
            found = POLLING.search(content)
            if found is None or time.monotonic() >= self.deadline + 60:
                break
            polled = True
            time.sleep(int(found.group(2)))
            content, headers = self.request(
                "poll", "GET", html.unescape(found.group(1).decode()),
                headers={"HX-Request": "true", "HX-Current-URL": page})
            if "hx-refresh" in headers:
                content, headers = self.request("poll", "GET", path)
                continue
            ended = ENDED.search(content)
            if ended is not None:
                content, headers = self.request(
                    "poll", "GET", html.unescape(ended.group(1).decode()),
                    headers={"HX-Request": "true", "HX-Target": target,
                             "HX-Current-URL": page})
        if polled:
            self.waits.append((action, time.perf_counter() - started))

    def query(self) -> str:
        q = "profile=chatcli"
        if self.threshold is not None:
            q += f"&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS={self.threshold}"
        return q

    def act(self, action: str) -> None:
        sid = self.session["id"]
        if action == "list":
            self.request("list", "GET", "/")
        elif action == "open":
            self.session = self.rng.choice(self.sessions)
            self.threshold = None
            self.call = self.rng.randrange(self.session["calls"])
            self.request("open", "GET", f"/sessions/{self.session['id']}/?{self.query()}"
                         f"&call={self.call}")
        elif action in ("step", "threshold"):
            if action == "step":
                self.call = min(max(self.call + self.rng.choice((-1, 1, 1)), 0),
                                self.session["calls"] - 1)
                target = "div#call-view"
            else:
                self.threshold = self.rng.choice(THRESHOLDS)
                target = "section#replay"
            path = f"/sessions/{sid}/?{self.query()}&call={self.call}"
            started = time.perf_counter()
            answer = self.request(action, "GET", path,
                                  headers={"HX-Request": "true", "HX-Target": target})
            self.follow(action, path, target, answer, started)
        elif action == "comment":
            body = f"body=Load+test+note+{self.number}-{len(self.samples)}&call={self.call}"
            self.request("comment", "POST", f"/sessions/{sid}/comments/", body=body,
                         headers={"HX-Request": "true"})

    def run(self) -> None:
        actions = [a for a in ACTIONS if a != "comment" or self.comments]
        weights = [ACTIONS[a] for a in actions]
        time.sleep(self.rng.uniform(0, 3))  # reviewers do not all arrive in the same instant
        for _ in range(10_000):  # bounded; the deadline ends it long before
            if time.monotonic() >= self.deadline:
                break
            self.act(self.rng.choices(actions, weights)[0])
            pause = self.rng.uniform(1, 3)
            if time.monotonic() + pause >= self.deadline:
                break
            time.sleep(pause)
        if self.conn is not None:
            self.conn.close()


# --- report ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


# SPEC §9 (2026-12): every 10-second window of the run keeps its p95 at or under this.
WINDOW_SECONDS = 10
WINDOW_P95_LIMIT_MS = 1000


def windows(samples: list[Sample]) -> list[tuple[int, int, float, float, int, float]]:
    """Per 10-second window of the run, by the second a request was sent: (start, requests,
    p50 ms, p95 ms, errors, max ms) for the windows holding a request, in order."""
    if not samples:
        return []
    first = min(s.sent_at for s in samples)
    out = []
    last = int(max(s.sent_at for s in samples) - first)
    for start in range(0, last + 1, WINDOW_SECONDS):
        rows = [s for s in samples if start <= s.sent_at - first < start + WINDOW_SECONDS]
        if not rows:
            continue
        times = sorted(s.seconds * 1000 for s in rows)
        out.append((start, len(rows), percentile(times, 50), percentile(times, 95),
                    sum(1 for s in rows if s.error), times[-1]))
    return out


def report(samples: list[Sample], comments: bool,
           waits: list[tuple[str, float]] = ()) -> int:
    names = [a for a in [*ACTIONS, "poll"] if any(s.action == a for s in samples)]
    print(f"{'action':<10} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'max ms':>8}")
    for name in [*names, "overall"]:
        rows = [s for s in samples if name == "overall" or s.action == name]
        times = sorted(s.seconds * 1000 for s in rows)
        errors = sum(1 for s in rows if s.error)
        print(f"{name:<10} {len(rows):>8} {errors:>6} {percentile(times, 50):>8.0f} "
              f"{percentile(times, 95):>8.0f} {times[-1]:>8.0f}")
    # Over time, by the second a request was sent: a slow start (cold workers) or a slow
    # middle (one heavy action) read differently, and each window has its own p95 limit.
    print(f"{'window':<10} {'requests':>8} {'errors':>6} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'max ms':>8}")
    over = []
    for start, count, p50, p95, errors, slowest in windows(samples):
        flag = ""
        if p95 > WINDOW_P95_LIMIT_MS:
            over.append(start)
            flag = f"  p95 above {WINDOW_P95_LIMIT_MS} ms"
        print(f"{f'{start}-{start + WINDOW_SECONDS}s':<10} {count:>8} {errors:>6} {p50:>8.0f} "
              f"{p95:>8.0f} {slowest:>8.0f}{flag}")
    # Actions whose answer was a status element (the worker replayed): how long the reviewer
    # waited for the result, polls included (reported; the windows hold each request).
    for name in ACTIONS:
        times = sorted(seconds * 1000 for action, seconds in waits if action == name)
        if times:
            print(f"{name} until its result (polled: the worker replayed): {len(times)}, "
                  f"p50 {percentile(times, 50):.0f} ms, p95 {percentile(times, 95):.0f} ms, "
                  f"max {times[-1]:.0f} ms")
    if not comments:
        print("comment: skipped (no URL named comment-create: the team-review feature is absent)")
    errors = sum(1 for s in samples if s.error)
    print(f"errors: {errors}")
    print(f"windows with p95 above {WINDOW_P95_LIMIT_MS} ms: {len(over)}"
          + (f" (starting at {', '.join(f'{s}s' for s in over)})" if over else ""))
    return 1 if errors or over or not samples else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()

    url = load_database_url()
    parts = urlsplit(url)
    log(f"database {parts.path.lstrip('/')} on {parts.hostname}:{parts.port or 5432} (recreated)")
    recreate_database(url)
    env = {**os.environ, "DATABASE_URL": url, "DEBUG": "false",
           "SECRET_KEY": os.environ.get("LOADTEST_SECRET_KEY") or secrets.token_hex(32),
           "DJANGO_SETTINGS_MODULE": "ctxsim.settings", "PYTHONPATH": str(ROOT),
           "SESSION_COOKIE_SECURE": "false", "CSRF_COOKIE_SECURE": "false",
           "GUNICORN_ACCESS_LOG": os.devnull, "LOG_LEVEL": "ERROR"}
    env.pop("CTXSIM_S3_BUCKET", None)
    env.pop("AWS_STORAGE_BUCKET_NAME", None)
    # Like the database, the shared cache of rendered call views starts empty every run.
    cache_dir = ROOT / "bench-output" / "loadtest-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    env["CACHE_URL"] = f"filecache://{cache_dir}"
    log(f"seeding {args.users} reviewers and {args.sessions} sessions of {args.calls} calls")
    seed = subprocess.run([PY, "-m", "loadtest.seed", str(args.users), str(args.sessions),
                           str(args.calls)], cwd=ROOT, env=env, check=True,
                          stdout=subprocess.PIPE, text=True)
    seeded = json.loads(seed.stdout.strip().splitlines()[-1])
    log(f"seeded in {seeded['seed_seconds']:.1f}s, default replays warmed in "
        f"{seeded['warm_seconds']:.1f}s")

    port = free_port()
    env.update({"HOST": "127.0.0.1", "PORT": str(port)})
    (ROOT / "bench-output").mkdir(exist_ok=True)
    server_log = open(ROOT / "bench-output" / "loadtest-server.log", "w")  # noqa: SIM115
    server = subprocess.Popen([str(ROOT / "bin" / "serve-prod")], cwd=ROOT, env=env,
                              stdout=server_log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        wait_until_up(port, server)
        log(f"gunicorn + task worker up on 127.0.0.1:{port} "
            f"({env.get('WEB_CONCURRENCY') or max((os.cpu_count() or 1) + 1, 2)} web workers); "
            f"{args.users} reviewers for {args.duration:.0f}s")
        deadline = time.monotonic() + args.duration
        reviewers = [Reviewer(n, port, cookie, seeded["sessions"], seeded["comments"], deadline)
                     for n, cookie in enumerate(seeded["cookies"][: args.users])]
        threads = [threading.Thread(target=r.run, daemon=True) for r in reviewers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.duration + 120)
    finally:
        stop(server)
        server_log.close()
        log("stack stopped (server log: bench-output/loadtest-server.log)")
    return report([s for r in reviewers for s in r.samples], seeded["comments"],
                  [w for r in reviewers for w in r.waits])


if __name__ == "__main__":
    sys.exit(main())
