"""gunicorn settings for ctxsim's production path (`bin/serve-prod`, README "Production").

Everything can be overridden from the environment: HOST/PORT (or GUNICORN_BIND),
WEB_CONCURRENCY (worker processes, default cores + 1), GUNICORN_THREADS (threads per
worker, default 2), GUNICORN_TIMEOUT (seconds, default 120: a first replay of a very long session
takes a while), CTXSIM_WARM_SESSIONS (sessions loaded before the workers start, default 20).

The app is preloaded in the master, which loads the token encoding and the newest sessions
once (`ctxsim.replays.services.warm_up`) before forking: workers start warm and share those
pages, instead of all of them loading the same things under their first requests.
"""

import multiprocessing
import os

bind = os.environ.get("GUNICORN_BIND") or (
    f"{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"
)
# Replays are CPU-bound Python: more processes than cores only split the per-process caches
# (loaded sessions, token counts, paused replays) without adding throughput; threads cover the
# requests that wait on the database.
workers = int(os.environ.get("WEB_CONCURRENCY") or max(multiprocessing.cpu_count() + 1, 2))
# Threads let a worker answer quick requests (lists, static files) while another thread replays;
# the replay itself is CPU-bound, so more processes, not more threads, add throughput.
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS") or 2)
timeout = int(os.environ.get("GUNICORN_TIMEOUT") or 120)
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then so one huge replay's memory is given back.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS") or 2000)
max_requests_jitter = max_requests // 10
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or "-"
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

    count = int(os.environ.get("CTXSIM_WARM_SESSIONS") or 20)
    server.log.info("ctxsim: warmed %d session(s) before starting the workers", warm_up(count))

