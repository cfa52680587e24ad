"""Helpers shared by the bench targets: the output folder, timing, medians, child processes."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = Path(os.environ.get("CTXSIM_BENCH_OUTPUT", ROOT / "bench-output"))

# Debian's Chromium, which Playwright drives here (it cannot download its own browsers): as
# root it needs --no-sandbox, and the background-networking flags keep it from calling out of
# an offline machine. Shared by the browser tests and `bench.browser_scale`.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


def chromium_path() -> str:
    """`CTXSIM_CHROMIUM`, else `chromium` on PATH, else empty."""
    return os.environ.get("CTXSIM_CHROMIUM") or shutil.which("chromium") or ""


def output_dir() -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    return OUTPUT


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def median(values: list[float]) -> float:
    return statistics.median(values)


def child(module: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run `python -m module args...` and return the JSON object its last stdout line holds.

    Targets run in their own interpreters so caches, heaps and peak-memory figures of one never
    leak into another."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), full_env.get("PYTHONPATH", "")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=full_env,
        stdout=subprocess.PIPE, text=True, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} exited with {proc.returncode}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{module} {' '.join(args)} printed no result")
    return json.loads(lines[-1])


def emit(result: dict) -> None:
    """A child's result: one JSON line on stdout (progress goes to stderr)."""
    print(json.dumps(result), flush=True)


def note(text: str) -> None:
    print(f"  .. {text}", file=sys.stderr, flush=True)


def django_environment(folder: str) -> dict[str, str]:
    """The settings of a bench that serves the app from its own SQLite file in `folder`, as in
    production (DEBUG off) but spoken to by Django's test client (plain HTTP, `testserver`)."""
    return {
        "DATABASE_URL": f"sqlite:///{folder}/db.sqlite3", "MEDIA_ROOT": f"{folder}/media",
        "STATIC_ROOT": f"{folder}/static", "DJANGO_SETTINGS_MODULE": "ctxsim.settings",
        "DEBUG": "false", "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-" + "x" * 50,
        "ALLOWED_HOSTS": "testserver", "SECURE_SSL_REDIRECT": "false",
    }


def setup_django(folder: str, **extra: str) -> dict[str, str]:
    """Point this process at a fresh database in `folder` (settings `django_environment` plus
    `extra`), set Django up and migrate; returns the settings, for worker processes."""
    env = {**django_environment(folder), **extra}
    os.environ.update(env)
    os.makedirs(f"{folder}/static", exist_ok=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return env


def bench_owner(*, wal: bool = False) -> tuple:
    """The bench's team and its owner, in the database `setup_django` made; `wal`: switch
    SQLite to WAL first, for targets whose worker processes write while this one reads."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from ctxsim.teams.models import Membership, Role, Team

    if wal:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode=WAL")
    team = Team.objects.create(name="Bench", slug="bench")
    user = get_user_model().objects.create_user("bench", password="bench-pass-123")
    Membership.objects.create(team=team, user=user, role=Role.OWNER)
    return team, user
