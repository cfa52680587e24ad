"""The process supervisor of `make run` and `make serve-prod` (issue 28 item 3).

`python -m ctxsim.supervisor --worker NAME=COMMAND ... -- WEB COMMAND` starts the web server
and each task worker, and keeps them running:

- a worker that exits (killed, out of memory, crashed) is started again after a pause that
  doubles from 1 s to 30 s while it keeps dying within a minute of its start, each time
  logged with how it ended; the web server is never stopped because a worker died;
- the web server exiting, or SIGINT/SIGTERM to the supervisor, stops everything: SIGTERM to
  each child (a worker finishes or re-queues its task), SIGKILL to what is left after
  `GRACE_SECONDS`; the supervisor exits with the web server's code.

Pure standard library: it imports no Django (it must outlive whatever a child breaks).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

FIRST_PAUSE = 1.0
LONGEST_PAUSE = 30.0
STABLE_SECONDS = 60.0  # a worker up this long starts its next pause from FIRST_PAUSE again
GRACE_SECONDS = 30.0
POLL_SECONDS = 0.2


def log(message: str) -> None:
    print(f"ctxsim supervisor: {message}", file=sys.stderr, flush=True)


def how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


@dataclass
class Child:
    name: str
    command: list[str]
    process: subprocess.Popen | None = None
    started: float = 0.0
    pause: float = FIRST_PAUSE
    restart_at: float | None = None
    restarts: int = field(default=0)

    def start(self) -> None:
        self.process = subprocess.Popen(self.command)
        self.started, self.restart_at = time.monotonic(), None
        log(f"{self.name} started (pid {self.process.pid})")


class Supervisor:
    def __init__(self, web: Child, workers: list[Child]) -> None:
        self.web, self.workers = web, workers
        self.stopping = False

    def run(self) -> int:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._stop)
        for worker in self.workers:
            worker.start()
        self.web.start()
        try:
            while not self.stopping:
                code = self.web.process.poll()
                if code is not None:
                    log(f"{self.web.name} {how_it_ended(code)}; stopping the workers")
                    return code
                self._tend_workers()
                time.sleep(POLL_SECONDS)
            return 0
        finally:
            self._stop_all()

    def _tend_workers(self) -> None:
        now = time.monotonic()
        for worker in self.workers:
            if worker.restart_at is not None:
                if now >= worker.restart_at:
                    worker.restarts += 1
                    worker.start()
                continue
            code = worker.process.poll()
            if code is None:
                continue
            if now - worker.started >= STABLE_SECONDS:
                worker.pause = FIRST_PAUSE
            log(f"{worker.name} (pid {worker.process.pid}) {how_it_ended(code)}; starting it "
                f"again in {worker.pause:g} s (the web server keeps serving)")
            worker.restart_at = now + worker.pause
            worker.pause = min(worker.pause * 2, LONGEST_PAUSE)

    def _stop(self, signum, frame) -> None:
        if self.stopping:  # a second Ctrl-C: no more waiting
            for child in self._children():
                child.kill()
        self.stopping = True

    def _children(self) -> list[subprocess.Popen]:
        return [c.process for c in (self.web, *self.workers)
                if c.process is not None and c.process.poll() is None]

    def _stop_all(self) -> None:
        for process in self._children():
            process.terminate()
        deadline = time.monotonic() + GRACE_SECONDS
        for process in self._children():
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
        for process in self._children():
            process.wait()
        log("stopped")


def parse(argv: list[str]) -> tuple[Child, list[Child]]:
    parser = argparse.ArgumentParser(prog="python -m ctxsim.supervisor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", action="append", default=[], metavar="NAME=COMMAND",
                        help="a task worker to keep running (repeatable)")
    parser.add_argument("web", nargs=argparse.REMAINDER, help="-- the web server's command")
    args = parser.parse_args(argv)
    web = args.web[1:] if args.web[:1] == ["--"] else args.web
    if not web:
        parser.error("the web server's command is missing (after --)")
    workers = []
    for spec in args.worker:
        name, sep, command = spec.partition("=")
        if not sep or not name or not command.strip():
            parser.error(f"--worker {spec!r}: expected NAME=COMMAND")
        workers.append(Child(f"worker {name}", shlex.split(command)))
    return Child("web server", web), workers


def main(argv: list[str] | None = None) -> int:
    web, workers = parse(sys.argv[1:] if argv is None else argv)
    return Supervisor(web, workers).run()


if __name__ == "__main__":
    sys.exit(main())
