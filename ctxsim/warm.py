"""What a web process's first requests would otherwise load, done once in gunicorn's master
before it forks (`replays.services.warm_up`), so that every worker starts with it.

Django imports the URLconf (every view module, the API's schema) at the first request a
process resolves, and compiles a template the first time it renders it: each gunicorn worker
paid ~160 ms for its first request and ~20 ms more for its first session page, all under the
load test's first seconds (issue 31).
"""

from __future__ import annotations

import gc
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def warm_pages() -> int:
    """Import the URLconf and compile the project's templates into the engine's cached
    loader. Returns how many templates it compiled; one that does not compile is logged and
    left to its first request (which reports the error as it always did)."""
    from django.template import TemplateSyntaxError, engines
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - the import is the point
    compiled = 0
    for engine in engines.all():
        for directory in map(Path, getattr(engine, "dirs", ())):
            for path in sorted(directory.rglob("*.html")):
                name = path.relative_to(directory).as_posix()
                try:
                    engine.get_template(name)
                except TemplateSyntaxError as exc:
                    logger.warning("template %s does not compile: %s", name, exc)
                    continue
                compiled += 1
    return compiled


def calm_collector() -> None:
    """For a long-lived process once it has loaded what it keeps (gunicorn's master after the
    warm-up, the task worker after the BPE table), before it forks: what is loaded goes out of
    the collector's sight (`gc.freeze`: a full collection no longer walks it, nor writes to
    its pages, which the forked processes then keep shared), and full collections run ten times
    less often, after 100 collections of the middle generation instead of 10 (the forked
    processes inherit both).

    A full collection walks every object the process holds. A web worker keeps replays of
    some 10,000 objects each: under 100 reviewers each full collection paused all of a worker's
    requests for about 0.5 s, four or five times a minute; a task replaying a 16,000-call
    session holds millions, and its full collections took 1.5-2.2 s of its 18-20 s against
    0.95 s so (issue 31). What they reclaim is little: dropped replays and call views go with
    reference counting (`Replay.cost`, `CallView`), and a task's child exits when it is done.
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)
