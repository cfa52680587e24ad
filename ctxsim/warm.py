"""What a web process's first requests would otherwise load, done once in gunicorn's master
before it forks (`replays.services.warm_up`), so that every worker starts with it.

Django imports the URLconf (every view module, the API's schema) at the first request a
process resolves, and compiles a template the first time it renders it: each gunicorn worker
paid ~160 ms for its first request and ~20 ms more for its first session page, all under the
load test's first seconds (issue 31).
"""

from __future__ import annotations

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
