"""gunicorn settings for ctxsim's production path (`bin/serve-prod`, README "Production").

Everything can be overridden from the environment: HOST/PORT (or GUNICORN_BIND),
WEB_CONCURRENCY (worker processes, default cores + 1), GUNICORN_THREADS (threads per
worker, default 2), GUNICORN_TIMEOUT (seconds, default 120: a first replay of a very long session
takes a while). CTXSIM_WARM_SESSIONS is a Django setting (README, Configuration).

The app is preloaded in the master, which loads the token encoding and the newest sessions
once (`ctxsim.replays.services.warm_up`) before forking: workers start warm and share those
pages, instead of all of them loading the same things under their first requests.
"""

import multiprocessing
import os

from gunicorn.glogging import Logger


def _number(name: str, default: int, minimum: int = 1) -> int:
    """An integer setting from the environment; a bad value stops start-up, naming it."""
    raw = os.environ.get(name) or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"gunicorn: {name}={raw!r} is not an integer") from None
    if value < minimum:
        raise SystemExit(f"gunicorn: {name}={value} must be at least {minimum}")
    return value


bind = os.environ.get("GUNICORN_BIND") or (
    f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
)
# Replays are CPU-bound Python: more processes than cores only split the per-process caches
# (loaded sessions, token counts, paused replays) without adding throughput; threads cover the
# requests that wait on the database.
workers = _number("WEB_CONCURRENCY", max(multiprocessing.cpu_count() + 1, 2))
# Threads let a worker answer quick requests (lists, static files) while another thread replays.
worker_class = "gthread"
threads = _number("GUNICORN_THREADS", 2)
timeout = _number("GUNICORN_TIMEOUT", 120)
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then so one huge replay's memory is given back.
max_requests = _number("GUNICORN_MAX_REQUESTS", 2000, minimum=0)
max_requests_jitter = max_requests // 10
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or "-"

# An invite link is a credential: whoever reads it can join the team. The access log shows
# the request line, path, query and referer (same-origin pages send their full URL), so the
# token, and any secret in a query string (issue 28 item 9), is cut from every field before
# it is written (`ctxsim.logs`).


class RedactingLogger(Logger):
    """gunicorn's logger with invite tokens and query-string secrets cut from access-log
    fields."""

    def atoms(self, resp, req, environ, request_time):
        from ctxsim.logs import redact_line, redact_query

        atoms = super().atoms(resp, req, environ, request_time)
        for key, value in atoms.items():
            if isinstance(value, str) and value:
                atoms[key] = redact_query(value) if key == "q" else redact_line(value)
        return atoms


logger_class = RedactingLogger
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL") or "info"
proc_name = "ctxsim"
# No control socket: its default path is one per user, which two servers (say `make loadtest`
# beside `make serve-prod`) would fight over.
control_socket_disable = True
wsgi_app = "ctxsim.wsgi:application"
preload_app = True


def when_ready(server):
    from ctxsim.replays.services import warm_up
    from ctxsim.warm import calm_collector

    server.log.info("ctxsim: warmed %d session(s) before starting the workers", warm_up())
    # What the warm-up loaded lives as long as the workers: out of the collector's sight, and
    # full collections ten times rarer in the workers (a 0.5 s pause of every request of the
    # worker, four or five times a minute under 100 reviewers, issue 31).
    calm_collector()

