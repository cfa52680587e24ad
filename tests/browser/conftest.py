"""Browser tier: Playwright driving Debian's system Chromium against Django's live server.

Playwright cannot download its own browsers here, so we point it at the system binary
(`CTXSIM_CHROMIUM`, else `chromium` on PATH). As root Chromium needs --no-sandbox, and the
background-networking flags keep it from calling out of this offline machine.
"""

from __future__ import annotations

import os
import threading

import pytest
from django.db import connections
from django_tasks_db.management.commands.db_worker import Worker
from playwright.sync_api import expect

from bench.common import CHROMIUM_ARGS, chromium_path
from tests.factories import password_for, use_fast_password_hashing

# Playwright's sync API runs an event loop in the test thread; Django's ORM refuses to run
# inside one unless told that this (single-threaded test) use is safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# What a page shows is asserted here, how fast it shows it in `make bench`: an expectation
# waits up to 15 s (Playwright's 5 s default failed a compare swap once while CI shared the two
# cores with other work).
expect.set_options(timeout=15_000)

CHROMIUM = chromium_path()


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/browser/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.browser)
            if not CHROMIUM:
                item.add_marker(
                    pytest.mark.skip(
                        reason="system Chromium not found: apt-get install chromium "
                        "(or set CTXSIM_CHROMIUM)"
                    )
                )


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    use_fast_password_hashing(settings)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1400, "height": 900}}


@pytest.fixture
def login(live_server, page):
    """Log a persona in through the real login form; returns the page."""

    def do_login(username: str, password: str | None = None):
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password or password_for(username))
        page.click("button[type=submit]")
        page.wait_for_load_state("networkidle")
        return page

    return do_login


class WorkerThread(threading.Thread):
    """The real django-tasks-db worker, in a thread of the test process.

    The test database is SQLite in memory, which a worker subprocess could not see; like the
    live server, this thread uses the test thread's connection.
    """

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.connection = connections["default"]
        self.worker = Worker(
            queue_names=["*"], interval=0.2, batch=False, backend_name="default",
            startup_delay=False, max_tasks=None, worker_id="browser-test",
            excluded_queue_names=[],
        )
        self.error: BaseException | None = None

    def run(self) -> None:
        connections["default"] = self.connection
        try:
            self.worker.run()
        except BaseException as error:  # reported by the test
            self.error = error

    def stop(self) -> None:
        self.worker.running = False
        self.join(timeout=30)


@pytest.fixture
def worker():
    thread = WorkerThread()
    thread.connection.inc_thread_sharing()
    yield thread
    if thread.is_alive():
        thread.stop()
    thread.connection.dec_thread_sharing()
    assert thread.error is None, thread.error


@pytest.fixture
def generated(personas):
    """30 model calls, an oversized tool result every third, uploaded by the owner."""
    from ctxsim.generator import generate_session
    from ctxsim.transcripts.store import save_sessions

    session = generate_session(30, seed=11, oversize_every=3)
    return save_sessions([session], team=personas.team, user=personas.users["owner"])[0]
