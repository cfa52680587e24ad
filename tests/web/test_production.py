"""The production path (README "Production"): settings with DEBUG off, static files served by
whitenoise through the WSGI app, the S3 media switch, and the gunicorn configuration.

Settings are read once per process, so each case starts a fresh interpreter with its own
environment. Nothing here measures time.
"""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROD_KEY = "test-production-secret-key-0123456789abcdef0123456789abcdef"


def run_python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with DJANGO_SETTINGS_MODULE set and `env` applied
    (a value of "" unsets nothing: it sets the variable empty, which .env cannot override)."""
    base = {
        k: v for k, v in os.environ.items()
        if not k.startswith(("AWS_", "CTXSIM_S3_", "DEFAULT_FILE_STORAGE"))
    }
    base.update({
        "DJANGO_SETTINGS_MODULE": "ctxsim.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "MEDIA_ROOT": str(tmp_path / "media"),
        "STATIC_ROOT": str(tmp_path / "static"),
        "PYTHONPATH": str(ROOT),
    })
    base.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=base,
        capture_output=True, text=True, timeout=120, check=False,
    )


SETUP = """
import django
django.setup()
from django.conf import settings
"""


def test_debug_off_requires_a_secret_key(tmp_path):
    result = run_python(SETUP, tmp_path, DEBUG="false", SECRET_KEY="")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_debug_off_with_a_key_uses_it_and_secure_cookies(tmp_path):
    code = SETUP + """
import json
print(json.dumps({"debug": settings.DEBUG, "key": settings.SECRET_KEY,
                  "secure": settings.SESSION_COOKIE_SECURE,
                  "static": settings.STORAGES["staticfiles"]["BACKEND"]}))
"""
    result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"debug": False, "key": PROD_KEY, "secure": True,
                    "static": "whitenoise.storage.CompressedStaticFilesStorage"}


def test_collected_static_files_are_served_by_whitenoise_with_debug_off(tmp_path):
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "DEBUG": "false", "SECRET_KEY": PROD_KEY,
             "STATIC_ROOT": str(tmp_path / "static"),
             "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3"},
    )
    assert collect.returncode == 0, collect.stderr
    assert (tmp_path / "static" / "css" / "ctxsim.css").is_file()
    assert (tmp_path / "static" / "css" / "ctxsim.css.gz").is_file()  # compressed for whitenoise
    code = """
import io, json
from wsgiref.util import setup_testing_defaults
from ctxsim.wsgi import application

def get(path, **headers):
    environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "HTTP_HOST": "127.0.0.1"}
    environ.update(headers)
    setup_testing_defaults(environ)
    seen = {}
    def start_response(status, response_headers, exc_info=None):
        seen["status"] = status
        seen["headers"] = dict(response_headers)
    body = b"".join(application(environ, start_response))
    return {"status": seen["status"], "headers": seen["headers"], "length": len(body),
            "body": body[:200].decode("latin-1")}

print(json.dumps({
    "css": get("/static/css/ctxsim.css"),
    "gzip": get("/static/css/ctxsim.css", HTTP_ACCEPT_ENCODING="gzip"),
    "missing": get("/static/css/no-such-file.css"),
}))
"""
    # Plain HTTP, as `serve-prod` on loopback: no redirect to HTTPS.
    result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY,
                        SECURE_SSL_REDIRECT="false")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    css = seen["css"]
    source = (ROOT / "static" / "css" / "ctxsim.css").read_bytes()
    assert css["status"].startswith("200")
    assert css["headers"]["Content-Type"].startswith("text/css")
    assert css["length"] == len(source)
    assert "max-age" in css["headers"]["Cache-Control"]  # whitenoise's caching headers
    assert seen["gzip"]["status"].startswith("200")
    assert seen["gzip"]["headers"].get("Content-Encoding") == "gzip"
    # Django itself never serves static files with DEBUG off: a miss is an ordinary 404.
    assert seen["missing"]["status"].startswith("404")


STORAGE_PROBE = SETUP + """
import json
from django.core.files.storage import default_storage
default_storage._setup()
backend = default_storage._wrapped
print(json.dumps({
    "backend": settings.STORAGES["default"]["BACKEND"],
    "class": type(backend).__module__ + "." + type(backend).__name__,
    "bucket": getattr(backend, "bucket_name", None),
    "endpoint": getattr(backend, "endpoint_url", None),
    "location": getattr(backend, "location", None),
}))
"""


def probe_storage(tmp_path, **env) -> dict:
    result = run_python(STORAGE_PROBE, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_media_stays_on_the_file_system_without_a_bucket(tmp_path):
    seen = probe_storage(tmp_path)
    assert seen["class"] == "django.core.files.storage.filesystem.FileSystemStorage"


@pytest.mark.parametrize("variable", ["CTXSIM_S3_BUCKET", "AWS_STORAGE_BUCKET_NAME"])
def test_a_bucket_switches_media_to_s3_compatible_storage(tmp_path, variable):
    pytest.importorskip("storages", reason="the s3 extra (django-storages[s3]) is not installed")
    seen = probe_storage(
        tmp_path, **{variable: "ctxsim-media", "AWS_S3_ENDPOINT_URL": "http://127.0.0.1:9000",
                     "CTXSIM_S3_PREFIX": "team-spills", "AWS_ACCESS_KEY_ID": "key",
                     "AWS_SECRET_ACCESS_KEY": "secret"},
    )
    assert seen == {
        "backend": "storages.backends.s3.S3Storage",
        "class": "storages.backends.s3.S3Storage",
        "bucket": "ctxsim-media",
        "endpoint": "http://127.0.0.1:9000",
        "location": "team-spills",
    }


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CTXSIM_S3_BUCKET": "Not_A_Bucket"}, "CTXSIM_S3_BUCKET='Not_A_Bucket'"),
        ({"CTXSIM_S3_BUCKET": "ctxsim-media", "AWS_S3_ENDPOINT_URL": "minio:9000"},
         "AWS_S3_ENDPOINT_URL='minio:9000'"),
        ({"CTXSIM_S3_BUCKET": "ctxsim-media", "AWS_S3_ADDRESSING_STYLE": "sideways"},
         "AWS_S3_ADDRESSING_STYLE='sideways'"),
        ({"AWS_STORAGE_BUCKET_NAME": "ctxsim-media",
          "DEFAULT_FILE_STORAGE_BACKEND": "django.core.files.storage.FileSystemStorage"},
         "DEFAULT_FILE_STORAGE_BACKEND"),
    ],
)
def test_bad_s3_settings_stop_start_up_naming_the_variable(tmp_path, env, named):
    result = run_python(SETUP, tmp_path, **env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert named in result.stderr


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DATABASE_CONN_MAX_AGE": "soon"}, "DATABASE_CONN_MAX_AGE='soon' is not an integer"),
        ({"DATABASE_CONN_MAX_AGE": "-1"}, "DATABASE_CONN_MAX_AGE=-1 must be at least 0"),
        ({"CTXSIM_WARM_SESSIONS": "all"}, "CTXSIM_WARM_SESSIONS='all' is not an integer"),
    ],
)
def test_bad_serving_numbers_stop_start_up_naming_the_variable(tmp_path, env, named):
    result = run_python(SETUP, tmp_path, **env)
    assert result.returncode != 0
    assert named in result.stderr


def test_gunicorn_runs_several_workers_by_default(monkeypatch):
    monkeypatch.delenv("WEB_CONCURRENCY", raising=False)
    monkeypatch.setenv("PORT", "8123")
    config = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert config["workers"] == os.cpu_count() + 1 >= 2
    assert config["bind"] == "127.0.0.1:8123"
    assert config["wsgi_app"] == "ctxsim.wsgi:application"
    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    assert runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))["workers"] == 3
    monkeypatch.setenv("GUNICORN_THREADS", "many")
    with pytest.raises(SystemExit, match="GUNICORN_THREADS='many' is not an integer"):
        runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))


@pytest.mark.django_db
def test_the_gunicorn_master_warms_the_newest_sessions_before_forking_workers(
    personas, monkeypatch
):
    from ctxsim.generator import generate_session
    from ctxsim.replays import services
    from ctxsim.replays.cache import REPLAYS, ReplayKey
    from ctxsim.transcripts.store import save_sessions

    config = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    assert config["preload_app"] is True and callable(config["when_ready"])
    rows = [save_sessions([generate_session(3, seed=n)], team=personas.team)[0]
            for n in range(3)]
    for row in rows:  # what an import stores: the default replay's summary
        services.summary_for(row, services.default_settings(row))
    from pygments.lexers import _pattern_cache

    _pattern_cache.clear()
    services.rendering.lexer_for_path.cache_clear()
    from django.template import engines
    from django.urls import clear_url_caches, get_resolver

    clear_url_caches()
    engine = engines["django"].engine
    engine.template_loaders[0].reset()
    with REPLAYS.another_process():
        assert services.warm_up(2) == 2
        assert len(_pattern_cache) > 100  # the lexers' file-name patterns, compiled once
        # The URLconf is imported and the pages' templates compiled: a worker's first
        # request resolves and renders with them.
        assert "url_patterns" in get_resolver().__dict__
        cached = engine.template_loaders[0].get_template_cache
        assert {"replays/session.html", "transcripts/session_list.html"} <= set(cached)
        # The two newest, each with its stored token counts handed to the default counter.
        counters = REPLAYS.loaded_sessions()
        loaded = set(counters)
        assert loaded == {rows[2].pk, rows[1].pk}
        assert all("cl100k_base" in seen for seen in counters.values())
        # And their stored summaries: a worker's first step reads none from the database.
        for row in rows[1:]:
            key = ReplayKey.of(row, services.default_settings(row).key)
            assert REPLAYS.runs.get(key) is not None
        assert REPLAYS.runs.get(ReplayKey.of(rows[0], services.default_settings(
            rows[0]).key)) is None  # not among the newest two


def test_serve_prod_runs_migrations_collectstatic_and_both_processes():
    script = (ROOT / "bin" / "serve-prod").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "bin" / "serve-prod")]).returncode == 0
    order = [script.index(step) for step in (
        "manage.py migrate", "manage.py collectstatic", "manage.py ctxsim_worker",
        "gunicorn --config"
    )]
    assert order == sorted(order)
    assert "export DEBUG=false" in script


def _deploy_check(tmp_path, **env) -> str:
    code = SETUP + """
from django.core.management import call_command
call_command("check", "--deploy", "--fail-level", "CRITICAL")
"""
    result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY, **env)
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_https_settings_come_from_the_environment_and_pass_the_deploy_check(tmp_path):
    """issue 20 item 22: `check --deploy` said W004 (no HSTS) and W008 (no SSL redirect) with
    no way to set them; behind a TLS proxy they are now on by default and configurable."""
    out = _deploy_check(tmp_path, SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto=https")
    assert "security.W004" not in out and "security.W008" not in out
    code = SETUP + """
import json
print(json.dumps({"redirect": settings.SECURE_SSL_REDIRECT,
                  "hsts": settings.SECURE_HSTS_SECONDS,
                  "proxy": settings.SECURE_PROXY_SSL_HEADER}))
"""
    result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY,
                        SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto=https",
                        SECURE_HSTS_SECONDS="600")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"redirect": True, "hsts": 600,
                    "proxy": ["HTTP_X_FORWARDED_PROTO", "https"]}


def test_plain_http_on_loopback_turns_the_redirect_and_hsts_off(tmp_path):
    """issue 20 item 22: `serve-prod` on 127.0.0.1 has no TLS; it sets the redirect off, and
    so does turning the Secure cookies off."""
    code = SETUP + """
print(settings.SECURE_SSL_REDIRECT, settings.SECURE_HSTS_SECONDS)
"""
    for plain in ({"SECURE_SSL_REDIRECT": "false"}, {"SESSION_COOKIE_SECURE": "false"}):
        result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY, **plain)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split() == ["False", "0"]
    script = (ROOT / "bin" / "serve-prod").read_text()
    assert 'SECURE_SSL_REDIRECT="${SECURE_SSL_REDIRECT:-false}"' in script


@pytest.mark.parametrize(("env", "named"), [
    ({"SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto"}, "SECURE_PROXY_SSL_HEADER"),
    ({"SECURE_HSTS_SECONDS": "a year"}, "SECURE_HSTS_SECONDS"),
    ({"SECURE_SSL_REDIRECT": "maybe"}, "SECURE_SSL_REDIRECT"),
])
def test_bad_https_settings_stop_start_up_naming_the_variable(tmp_path, env, named):
    """issue 20 item 22."""
    result = run_python(SETUP, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY, **env)
    assert result.returncode != 0
    assert named in result.stderr


def test_the_gunicorn_access_log_never_shows_an_invite_token(tmp_path):
    """issue 20 item 22: invite links were written whole to the access log (request line and
    referer), so anyone reading the log could join the team."""
    from datetime import timedelta
    from types import SimpleNamespace

    from gunicorn.config import Config

    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    cfg = Config()
    log_file = tmp_path / "access.log"
    cfg.set("accesslog", str(log_file))
    cfg.set("logger_class", conf["logger_class"])
    logger = cfg.logger_class(cfg)
    token = "Zq3sEcReTtOkEn0123456789abcdef"
    environ = {"REQUEST_METHOD": "POST", "RAW_URI": f"/invites/{token}/?next=/",
               "PATH_INFO": f"/invites/{token}/", "QUERY_STRING": "next=/",
               "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "10.0.0.1",
               "HTTP_REFERER": f"https://ctxsim.example/invites/{token}/"}
    request = SimpleNamespace(headers=[("REFERER", environ["HTTP_REFERER"])])
    response = SimpleNamespace(status="302 Found", sent=0, headers=[])
    logger.access(response, request, environ, timedelta(milliseconds=3))
    for handler in logger.access_log.handlers:
        handler.flush()
    line = log_file.read_text()
    assert "/invites/" in line and "POST" in line and "302" in line
    assert token not in line


def test_make_run_serves_with_debug_off_unless_asked(tmp_path):
    """issue 20 item 23: `make run` ran with DEBUG on and showed tracebacks (with the
    environment) to every team member. bin/run-dev now turns it off by default, keeps its
    own secret key out of .env, and lets whitenoise serve static files from the finders."""
    script = (ROOT / "bin" / "run-dev").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "bin" / "run-dev")]).returncode == 0
    assert 'export DEBUG="${DEBUG:-false}"' in script
    assert "WHITENOISE_USE_FINDERS" in script and ".env" not in script.replace("# ", "")
    code = """
import json
from wsgiref.util import setup_testing_defaults
from django.conf import settings
from ctxsim.wsgi import application

def get(path):
    environ = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "HTTP_HOST": "127.0.0.1"}
    setup_testing_defaults(environ)
    seen = {}
    def start_response(status, headers, exc_info=None):
        seen["status"] = status
    b"".join(application(environ, start_response))
    return seen["status"]

print(json.dumps({"debug": settings.DEBUG, "css": get("/static/css/ctxsim.css"),
                  "missing": get("/no-such-page/")}))
"""
    result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY,
                        SESSION_COOKIE_SECURE="false", CSRF_COOKIE_SECURE="false",
                        WHITENOISE_USE_FINDERS="true")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["debug"] is False
    assert seen["css"].startswith("200")  # no collectstatic needed in development
    assert not seen["missing"].startswith("500")


def test_the_gunicorn_access_log_never_shows_a_secret_in_a_query_string(tmp_path):
    """issue 28 item 9: a secret sent in the API's `?name=` landed in the access log."""
    from datetime import timedelta
    from types import SimpleNamespace

    from gunicorn.config import Config

    conf = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    cfg = Config()
    log_file = tmp_path / "access.log"
    cfg.set("accesslog", str(log_file))
    cfg.set("access_log_format", '%(h)s "%(r)s" %(s)s q=%(q)s')
    cfg.set("logger_class", conf["logger_class"])
    logger = cfg.logger_class(cfg)
    core = "PlantedAnthropicKey0123456789"
    query = f"name=sk%2Dant-api03-{core}&format=claude-code"
    environ = {"REQUEST_METHOD": "POST", "RAW_URI": f"/api/v1/transcripts?{query}",
               "PATH_INFO": "/api/v1/transcripts", "QUERY_STRING": query,
               "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "10.0.0.1"}
    request = SimpleNamespace(headers=[])
    response = SimpleNamespace(status="201 Created", sent=0, headers=[])
    logger.access(response, request, environ, timedelta(milliseconds=3))
    for handler in logger.access_log.handlers:
        handler.flush()
    line = log_file.read_text()
    assert "/api/v1/transcripts?name=" in line and "format=claude-code" in line
    assert core not in line and "[REDACTED:anthropic-key]" in line


def test_djangos_own_log_lines_never_print_an_invite_token(tmp_path):
    """issue 28 item 10: `Forbidden (CSRF cookie not set.): /invites/<token>/` (and Django's
    `Not Found:` line, and the development server's request line) printed the token."""
    token = "Zq3sEcReTtOkEn0123456789abcdef"
    code = SETUP + f"""
import logging
from django.core.management import call_command
from django.test import Client
call_command("migrate", verbosity=0)
Client(enforce_csrf_checks=True).post("/invites/{token}/")
Client().get("/invites/{token}/")
logging.getLogger("django.server").info('"%s" %s %s', "GET /invites/{token}/ HTTP/1.1",
                                        "200", "5", extra={{"status_code": 200}})
"""
    result = run_python(code, tmp_path, DEBUG="false", SECRET_KEY=PROD_KEY, ALLOWED_HOSTS="*",
                        SECURE_SSL_REDIRECT="false")
    assert result.returncode == 0, result.stderr
    assert "Forbidden (CSRF cookie not set.): /invites/[token]/" in result.stderr
    assert "Not Found: /invites/[token]/" in result.stderr
    assert "GET /invites/[token]/ HTTP/1.1" in result.stderr
    assert token not in result.stderr


def test_gunicorn_workers_run_full_collections_ten_times_less_often(monkeypatch):
    """What a worker keeps (replays holding every call) makes a full collection a pause of
    all its requests; a dropped replay needs none (`test_replay_garbage`), so the master
    leaves its workers a threshold ten times the default."""
    import gc
    import logging
    from types import SimpleNamespace

    from ctxsim.replays import services

    config = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    monkeypatch.setattr(services, "warm_up", lambda: 0)
    monkeypatch.setattr(gc, "freeze", lambda: None)  # what the master loaded stays collectable
    before = gc.get_threshold()
    try:
        config["when_ready"](SimpleNamespace(log=logging.getLogger("gunicorn.test")))
        assert gc.get_threshold() == (before[0], before[1], 100)
    finally:
        gc.set_threshold(*before)
