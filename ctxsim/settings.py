"""ctxsim settings: everything comes from the environment (django-environ), with safe dev defaults.

Bad values fail at start-up with ImproperlyConfigured naming the variable. See the README's
configuration table for every variable.
"""

from __future__ import annotations

import os
import tempfile
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _bool(name: str, default: bool) -> bool:
    raw = env.str(name, default=str(default)).strip().lower()
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off", ""}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean (use true or false)")


def _int(name: str, default: int, minimum: int = 0) -> int:
    raw = env.str(name, default=str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name}={value} must be at least {minimum}")
    return value


DEBUG = _bool("DEBUG", True)

# A fixed development key keeps sessions valid across restarts; production must set its own.
_DEV_SECRET_KEY = "ctxsim-dev-only-secret-key-not-for-production-0123456789abcdef"
SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set when DEBUG is off (e.g. SECRET_KEY=$(openssl rand -hex 32))"
        )
    SECRET_KEY = _DEV_SECRET_KEY

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "django_tasks_db",
    # django-ninja: listed so its docs page renders from its own static files, not a CDN.
    "ninja",
    "ctxsim.teams",
    "ctxsim.transcripts",
    "ctxsim.replays",
    "ctxsim.analysis",
    "ctxsim.overview",
    "ctxsim.reviews",
    "ctxsim.api",
    "ctxsim.jobs",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Refuses oversized bodies by their declared length before the CSRF check parses them.
    "ctxsim.request_limits.RequestSizeLimitMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    # An empty 405, a text 400 or 429 gets the app's error page (ctxsim/error_pages.py).
    "ctxsim.error_pages.ErrorPageMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into the lockout page.
    "axes.middleware.AxesMiddleware",
    # A request past its user's or team's pending background work, or past its user's
    # concurrent replays (ctxsim/replays/limits.py): 429 (ctxsim/jobs/policy.py).
    "ctxsim.jobs.policy.QueueFullMiddleware",
]

ROOT_URLCONF = "ctxsim.urls"
WSGI_APPLICATION = "ctxsim.wsgi.application"
ASGI_APPLICATION = "ctxsim.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "ctxsim.teams.context_processors.current_team",
            ],
        },
    }
]

_database_url = env.str("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
if _database_url.split(":", 1)[0] not in {"sqlite", "postgres", "postgresql", "pgsql"}:
    raise ImproperlyConfigured(
        f"DATABASE_URL={_database_url!r} is not supported: use sqlite:///PATH or "
        "postgres://USER:PASSWORD@HOST:PORT/NAME"
    )
try:
    DATABASES = {"default": env.db_url_config(_database_url)}
except (ImproperlyConfigured, ValueError) as exc:
    raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while the task worker writes an import.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
    # Seconds a write waits for SQLite's lock before "database is locked".
    DATABASES["default"]["OPTIONS"].setdefault(
        "timeout", _int("CTXSIM_SQLITE_BUSY_SECONDS", 20, minimum=1))
    # Transactions take the write lock when they begin, so concurrent writers queue for the
    # busy timeout above. A deferred one that read first and then writes cannot wait (SQLite
    # refuses the upgrade at once): 20 writers saw a quarter of their writes fail with
    # "database is locked" (issue 20 item 10).
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
    # Tests on SQLite use a file, not the in-memory default: the browser tier runs the live
    # server, the task worker and the test in separate threads, and an in-memory database
    # refuses a concurrent write ("table is locked") where a file waits for its turn. One file
    # per process, in the temp dir, so two test runs in one checkout never share it; the test
    # runner deletes it when the run ends.
    DATABASES["default"].setdefault("TEST", {}).setdefault(
        "NAME", str(Path(tempfile.gettempdir()) / f"ctxsim-test-{os.getpid()}.sqlite3")
    )
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# Seconds a request thread keeps its database connection for the next request (0: a new
# connection per request). Opening a PostgreSQL connection forks a server process: under load
# that was a visible share of the CPU. Health checks drop connections the server closed.
DATABASES["default"]["CONN_MAX_AGE"] = _int("DATABASE_CONN_MAX_AGE", 60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Rendered call views are shared between requests (and, with a shared backend, between
# worker processes): `locmemcache://` by default, `filecache:///path` or `rediscache://…` in
# production (bin/serve-prod uses a file cache).
try:
    CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://ctxsim")}
except (ImproperlyConfigured, ValueError, KeyError) as exc:
    raise ImproperlyConfigured(f"CACHE_URL is not a valid cache URL: {exc}") from None
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.filebased.FileBasedCache":
    CACHES["default"]["BACKEND"] = "ctxsim.filecache.FileCache"  # culled less often
# Sessions are read from the cache when every process shares it (file or Redis; written
# through to the database): the database read was 0.65 ms of CPU in every request. A cache
# local to each process would serve one process's stale copy after another changed it.
if CACHES["default"]["BACKEND"].endswith(("FileCache", "RedisCache")):
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
if not CACHES["default"]["BACKEND"].endswith("RedisCache"):
    # Local and file caches cull at this many entries; Redis evicts by its own policy and
    # would pass the option on to its client as an unknown connection argument.
    CACHES["default"].setdefault("OPTIONS", {}).setdefault("MAX_ENTRIES", 2000)

# One queue per kind of work, so a long sweep never holds up another team's import: a worker
# takes every queue (`db_worker --queue-name '*'`) or only some (`--queue-name imports`).
TASK_QUEUES = ("imports", "replays", "sweeps")
TASKS = {
    "default": {
        "BACKEND": env.str("TASK_BACKEND", default="django_tasks_db.DatabaseBackend"),
        "QUEUES": ["default", *TASK_QUEUES],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes, ctxsim/teams/throttle.py): failures are counted per username
# and client address together, and per address alone at a higher limit; either reaching its
# limit locks logins for the cool-off time. Never per username alone: anyone could lock any
# user out (issue 28 item 8).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
CTXSIM_LOGIN_FAILURE_LIMIT = _int("CTXSIM_LOGIN_FAILURE_LIMIT", 5, minimum=1)
CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT = _int("CTXSIM_LOGIN_ADDRESS_FAILURE_LIMIT",
                                          4 * CTXSIM_LOGIN_FAILURE_LIMIT, minimum=1)
AXES_FAILURE_LIMIT = "ctxsim.teams.throttle.failure_limit"
AXES_COOLOFF_TIME = timedelta(minutes=_int("CTXSIM_LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "ctxsim.teams.throttle.locked_out"
AXES_CLIENT_IP_CALLABLE = "ctxsim.teams.throttle.client_ip"
# Proxies in front of the app that append the client's address to X-Forwarded-For (0: none,
# REMOTE_ADDR is the client). Behind one without this, every login counts as one address.
CTXSIM_TRUSTED_PROXIES = _int("CTXSIM_TRUSTED_PROXIES", 0)
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Development with DEBUG off (`make run`): whitenoise serves the files from their source
# folders, so no collectstatic is needed; production serves the collected STATIC_ROOT.
WHITENOISE_USE_FINDERS = _bool("WHITENOISE_USE_FINDERS", DEBUG)
WHITENOISE_AUTOREFRESH = WHITENOISE_USE_FINDERS
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(BASE_DIR / "media")))
MEDIA_URL = "media/"  # never routed: spilled files are served only by permission-checked views
STORAGES = {
    "default": {
        "BACKEND": env.str(
            "DEFAULT_FILE_STORAGE_BACKEND", default="django.core.files.storage.FileSystemStorage"
        ),
    },
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
}

# Media (spilled files) on S3-compatible storage: set the bucket and the default storage becomes
# django-storages' S3 backend (install the `s3` extra: pip install -e '.[s3]'). Credentials
# come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, or boto3's usual chain when unset.
_s3_bucket_var = next(
    (n for n in ("CTXSIM_S3_BUCKET", "AWS_STORAGE_BUCKET_NAME") if env.str(n, default="")), None
)
if _s3_bucket_var is not None:
    import importlib.util
    import re
    from urllib.parse import urlsplit

    _bucket = env.str(_s3_bucket_var).strip()
    if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", _bucket):
        raise ImproperlyConfigured(
            f"{_s3_bucket_var}={_bucket!r} is not a valid bucket name (3-63 characters: "
            "lower-case letters, digits, dots and hyphens)"
        )
    if env.str("DEFAULT_FILE_STORAGE_BACKEND", default=""):
        raise ImproperlyConfigured(
            f"set either {_s3_bucket_var} (S3 storage) or DEFAULT_FILE_STORAGE_BACKEND, not both"
        )
    if importlib.util.find_spec("storages") is None or importlib.util.find_spec("boto3") is None:
        raise ImproperlyConfigured(
            f"{_s3_bucket_var} is set but django-storages[s3] is not installed "
            "(pip install -e '.[s3]')"
        )
    _s3_options: dict[str, object] = {"bucket_name": _bucket, "default_acl": None,
                                      "file_overwrite": True, "querystring_auth": True}
    _endpoint = env.str("AWS_S3_ENDPOINT_URL", default="").strip()
    if _endpoint:
        _parts = urlsplit(_endpoint)
        if _parts.scheme not in ("http", "https") or not _parts.netloc:
            raise ImproperlyConfigured(
                f"AWS_S3_ENDPOINT_URL={_endpoint!r} is not an http(s) URL "
                "(e.g. https://s3.eu-central-1.amazonaws.com or http://127.0.0.1:9000)"
            )
        _s3_options["endpoint_url"] = _endpoint
    for _var, _option in (
        ("AWS_S3_REGION_NAME", "region_name"),
        ("AWS_ACCESS_KEY_ID", "access_key"),
        ("AWS_SECRET_ACCESS_KEY", "secret_key"),
        ("CTXSIM_S3_PREFIX", "location"),
    ):
        if env.str(_var, default="").strip():
            _s3_options[_option] = env.str(_var).strip()
    _addressing = env.str("AWS_S3_ADDRESSING_STYLE", default="").strip()
    if _addressing:
        if _addressing not in ("path", "virtual", "auto"):
            raise ImproperlyConfigured(
                f"AWS_S3_ADDRESSING_STYLE={_addressing!r} must be path, virtual or auto"
            )
        _s3_options["addressing_style"] = _addressing
    STORAGES["default"] = {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": _s3_options}

# Transcripts: size limit of one uploaded file, and the size above which an upload is imported
# by the background worker instead of during the request.
CTXSIM_MAX_UPLOAD_BYTES = _int("CTXSIM_MAX_UPLOAD_BYTES", 200 * 1024 * 1024, minimum=1)
# One upload request (every file and the form): by default one file at the limit plus 1 MB.
CTXSIM_MAX_REQUEST_BYTES = _int("CTXSIM_MAX_REQUEST_BYTES", CTXSIM_MAX_UPLOAD_BYTES + 1024 * 1024,
                                minimum=1)
CTXSIM_BACKGROUND_IMPORT_BYTES = _int("CTXSIM_BACKGROUND_IMPORT_BYTES", 2 * 1024 * 1024)
# A background import still "running" after this long without a heartbeat lost its worker: it
# is settled (done if stored, else queued again once, else failed; README).
CTXSIM_IMPORT_TIMEOUT_SECONDS = _int("CTXSIM_IMPORT_TIMEOUT_SECONDS", 600, minimum=1)
# The same for a sweep: running without a heartbeat this long, it is marked failed.
CTXSIM_SWEEP_TIMEOUT_SECONDS = _int("CTXSIM_SWEEP_TIMEOUT_SECONDS", 600, minimum=1)
# What each web process keeps in memory between requests (MB, estimated): loaded sessions, their
# stored summaries and the replays paused or kept for the call view (ctxsim/replays/cache.py).
CTXSIM_SESSION_CACHE_MB = _int("CTXSIM_SESSION_CACHE_MB", 512, minimum=1)
# Stored replays a session keeps for settings other than its default and saved profiles' (the
# least recently used one goes first, with the spill files nothing else points to).
CTXSIM_RUNS_PER_SESSION = _int("CTXSIM_RUNS_PER_SESSION", 16, minimum=1)
# The insights page (issue 20 item 5): call replays (session calls × profiles not stored yet)
# one request computes itself; past that the task worker does (queue "replays") while the
# page polls; past the maximum nothing is computed. A job silent past the timeout is requeued.
CTXSIM_INSIGHTS_INLINE_CALLS = _int("CTXSIM_INSIGHTS_INLINE_CALLS", 2_000, minimum=0)
CTXSIM_INSIGHTS_MAX_CALLS = _int("CTXSIM_INSIGHTS_MAX_CALLS", 40_000, minimum=1)
CTXSIM_INSIGHTS_JOB_TIMEOUT_SECONDS = _int("CTXSIM_INSIGHTS_JOB_TIMEOUT_SECONDS", 3600,
                                           minimum=1)
# New replays one user may run at the same time, across processes through the cache (more get
# a 429).
CTXSIM_REPLAYS_PER_USER = _int("CTXSIM_REPLAYS_PER_USER", 1, minimum=1)
# Sessions with more model calls than this are replayed by the worker when the session page
# needs a replay that is not stored (the page polls its progress); shorter ones inline. A
# 1,000-call session replays in about 1-4 s here, the demo's longest has 150 calls.
CTXSIM_INLINE_REPLAY_CALLS = _int("CTXSIM_INLINE_REPLAY_CALLS", 1000, minimum=0)
# Where the processes of this machine take turns at replaying the same settings (lock files,
# ctxsim/replays/flight.py); shared by every process of one deployment.
CTXSIM_LOCK_DIR = Path(env.str("CTXSIM_LOCK_DIR", default=str(BASE_DIR / ".cache" / "locks")))
# The largest trace a download or the API writes, estimated before the replay (bytes): a full
# trace holds every history sent and grows with the square of the calls; past it a 413 links
# the summary trace (ctxsim/replays/traces.py).
CTXSIM_TRACE_MAX_BYTES = _int("CTXSIM_TRACE_MAX_BYTES", 512 * 1024 * 1024, minimum=1)
# Background tasks (replays, overview figures, sweeps, traces; not imports) one user, and one
# team, may have queued or running at once; a request that would queue more gets a 429
# (ctxsim/jobs/policy.py).
CTXSIM_PENDING_PER_USER = _int("CTXSIM_PENDING_PER_USER", 4, minimum=1)
# Tasks queued per overview column (each starting at another session), so that as many workers
# share it; the quota counts the column once.
CTXSIM_OVERVIEW_TASKS_PER_COLUMN = _int("CTXSIM_OVERVIEW_TASKS_PER_COLUMN", 2, minimum=1)
CTXSIM_PENDING_PER_TEAM = _int("CTXSIM_PENDING_PER_TEAM", 16, minimum=1)
# The most memory (address space, MB) one background task may take: each runs in a child of
# the worker limited to it (ctxsim/jobs/worker.py); a task over it fails with a message and the
# worker lives on. 0: no limit, tasks run in the worker process itself.
CTXSIM_WORKER_MAX_MB = _int("CTXSIM_WORKER_MAX_MB", 4096, minimum=0)
# Newest sessions gunicorn's master loads before forking its workers (deploy/gunicorn.conf.py).
CTXSIM_WARM_SESSIONS = _int("CTXSIM_WARM_SESSIONS", 20)
# Team invites: how long an invite link stays valid (it works once).
CTXSIM_INVITE_DAYS = _int("CTXSIM_INVITE_DAYS", 7, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Content Security Policy (Django's built-in middleware): scripts only from our own static files
# or inline with the per-request nonce; transcript content can therefore never run script.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF, CSP.NONCE],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SESSION_COOKIE_SECURE = _bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = _bool("CSRF_COOKIE_SECURE", True)
    # HTTPS only, as the cookies above: plain-HTTP requests are redirected and browsers told
    # to stay on HTTPS (HSTS). Off by default where the cookies are not Secure (plain HTTP, as
    # bin/serve-prod on loopback).
    SECURE_SSL_REDIRECT = _bool("SECURE_SSL_REDIRECT", SESSION_COOKIE_SECURE)
    SECURE_HSTS_SECONDS = _int("SECURE_HSTS_SECONDS",
                               365 * 24 * 3600 if SECURE_SSL_REDIRECT else 0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = _bool("SECURE_HSTS_PRELOAD", False)
    # Behind a TLS-terminating proxy, the header (and value) it sets on HTTPS requests, e.g.
    # `X-Forwarded-Proto=https`; without it every proxied request looks like plain HTTP and the
    # redirect above would loop. Only set it when the proxy always sets or strips that header.
    _proxy_header = env.str("SECURE_PROXY_SSL_HEADER", default="").strip()
    if _proxy_header:
        _name, _sep, _value = _proxy_header.partition("=")
        if not _sep or not _name.strip() or not _value.strip():
            raise ImproperlyConfigured(
                f"SECURE_PROXY_SSL_HEADER={_proxy_header!r} must be HEADER=VALUE "
                "(e.g. X-Forwarded-Proto=https)"
            )
        SECURE_PROXY_SSL_HEADER = (
            "HTTP_" + _name.strip().upper().replace("-", "_"), _value.strip()
        )

# Every line passes `ctxsim.logs.RedactFilter` (no invite token, no secret in a query string;
# issue 28): Django's own loggers write through these handlers only (its defaults' console
# and mail handlers are replaced; the development server's request lines keep their format).
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact": {"()": "ctxsim.logs.RedactFilter"}},
    "formatters": {"django.server": {"()": "django.utils.log.ServerFormatter",
                                     "format": "[{server_time}] {message}", "style": "{"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "filters": ["redact"]},
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server",
                          "filters": ["redact"]},
    },
    "loggers": {
        "django": {"handlers": [], "level": "INFO"},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}
