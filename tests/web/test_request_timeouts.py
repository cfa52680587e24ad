"""Issue 31: the browser waits for the server's answer as long as the server may take, and a
429 never replaces what a page shows."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _htmx_config(html: str) -> dict:
    found = re.search(r"<meta name=\"htmx-config\" content='([^']*)'>", html)
    assert found, "no htmx-config meta"
    return json.loads(found.group(1))


def test_htmx_waits_longer_than_gunicorn_lets_a_request_run(personas, monkeypatch):
    monkeypatch.delenv("GUNICORN_TIMEOUT", raising=False)
    gunicorn = runpy.run_path(str(ROOT / "deploy" / "gunicorn.conf.py"))
    html = personas.client("viewer").get("/").content.decode()
    config = _htmx_config(html)
    # htmx 4 drops an answer after `defaultTimeout` (60 s unless set) while the server goes on.
    assert config["defaultTimeout"] > gunicorn["timeout"] * 1000
    assert 429 in config["noSwap"]


def test_errors_js_says_what_a_429_means_instead_of_swapping_it():
    script = (ROOT / "static" / "js" / "errors.js").read_text()
    assert "status !== 429" in script and "status === 429" in script
