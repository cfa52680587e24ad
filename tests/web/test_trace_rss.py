"""Issue 20 acceptance 4: the trace download of a 2,000-call session streams with bounded
memory (≤ 200 MB RSS growth), in full mode (every stage's history at every call) and as the
page links it (summary mode, the session's own profile), measured in a fresh process
(`trace_rss.py`) so nothing else this test run loaded counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CALLS = 2000
LIMIT_MB = 200
# A full trace writes every stage's history at every call, so it grows with the square of
# the calls until something bounds the history: the session's own profile writes several GB
# for 2,000 generated calls (minutes). The gateway's context limit alone, truncating at
# 20,000 tokens, bounds each call's history (about 80 KB) and keeps the trace at ~240 MB —
# more than the memory allowed, so it cannot pass by being held whole — in ~20 s.
QUERY = ("profile=aivax&stages=context_limit:gateway&contextMaximumSize=20000"
         "&contextOverflowAction=Truncate&summary=0")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_the_full_trace_of_a_2000_call_session_streams_in_bounded_memory(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'trace.sqlite3'}",
           "MEDIA_ROOT": str(tmp_path / "media"), "DEBUG": "false",
           "SECRET_KEY": "trace-rss-test-" + "x" * 40, "CTXSIM_WARM_SESSIONS": "0",
           "DJANGO_SETTINGS_MODULE": "ctxsim.settings",
           # What is measured is the request's own streaming, not the worker's (issue 28).
           "CTXSIM_INLINE_REPLAY_CALLS": str(CALLS)}
    env.pop("CACHE_URL", None)

    def run(*args: str) -> dict:
        done = subprocess.run([sys.executable, "-m", "tests.web.trace_rss", *args], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    stored = run("setup", str(CALLS))
    assert stored["calls"] == CALLS
    result = run("measure", str(stored["session"]), QUERY)
    assert result["status"] == 200 and result["streaming"]
    assert result["head"].startswith('{"effective_config"')
    assert result["bytes"] > LIMIT_MB * 1024 * 1024  # bigger than what memory may hold
    assert result["growth_mb"] <= LIMIT_MB, result
    # The page's own link: the session's default profile, summary mode.
    default = run("measure", str(stored["session"]), "")
    assert default["status"] == 200 and default["streaming"]
    assert default["head"].startswith('{"effective_config"')
    assert default["growth_mb"] <= LIMIT_MB, default
