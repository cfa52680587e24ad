"""A two-parameter sweep on a 200-call session, end to end: background worker, progress bar,
the chart with its Pareto front, and applying a point to the session page."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

import pytest
from playwright.sync_api import expect

from ctxsim.analysis.models import Sweep
from ctxsim.generator import generate_session
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def long_session(personas):
    return save_sessions([generate_session(200, seed=9)], team=personas.team)[0]


def test_a_sweep_runs_in_the_worker_plots_its_front_and_applies_a_point(
    personas, login, live_server, settings, long_session, worker, monkeypatch
):
    import time

    from ctxsim.insights import sweep as engine

    settings.CTXSIM_INLINE_SWEEP_WORK = 10  # 4 points x 200 calls: the background path
    # Each point takes at least the page's poll interval, so a poll sees the sweep part done
    # (on a fast machine all four points once fitted between two polls).
    evaluate = engine.evaluate

    def slow(*args, **kwargs):
        time.sleep(1.1)
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(engine, "evaluate", slow)
    assert long_session.model_call_count >= 200
    page = login("reviewer")
    page.goto(f"{live_server.url}/sessions/{long_session.pk}/")
    page.click("#insights-link")
    expect(page.locator('.insight-col[data-profile="none"] .hit-rate')).to_be_visible()
    page.click("#sweep-link")
    page.wait_for_url(re.compile(rf"/sessions/{long_session.pk}/sweeps/(\?|$)"))
    # The select submits its form from a listener insights.js attaches: wait until it says so.
    expect(page.locator("html")).to_have_attribute("data-autosubmit", "ready")
    # Choosing the profile reloads the page (it replays); give a loaded CI machine time.
    with page.expect_navigation(timeout=60_000):
        page.select_option("#sweep-profile-select", "aivax")
    expect(page.locator("#param1")).to_have_value("toolContextCount", timeout=30_000)
    page.fill("#start1", "2")
    page.fill("#stop1", "4")
    page.fill("#step1", "2")
    page.select_option("#param2", "contextMaximumSize")
    page.fill("#start2", "20000")
    page.fill("#stop2", "60000")
    page.fill("#step2", "40000")
    page.click("#run-sweep")

    sweep = Sweep.objects.get()
    assert sweep.total == 4 and sweep.status == "queued"
    bar = page.locator("#sweep-status progress.sweep-progress")
    expect(bar).to_be_visible()
    page.evaluate("""() => {
        window.seenDone = [];
        new MutationObserver(() => {
            const bar = document.querySelector("progress.sweep-progress");
            if (bar) window.seenDone.push(Number(bar.value));
        }).observe(document.body, {subtree: true, childList: true});
    }""")
    page.evaluate("window.__same_page = true")
    worker.start()
    expect(page.locator("#sweep-status")).to_have_attribute("data-status", "done",
                                                            timeout=120_000)
    assert page.evaluate("window.__same_page") is True  # polled in place, no reload
    # The in-memory test database locks whole tables: stop the worker's polling before the
    # page replays (and writes) again, or one of the two is refused with "table is locked".
    worker.stop()
    assert bar.count() == 0
    assert any(0 < value < 100 for value in page.evaluate("window.seenDone"))  # percent

    expect(page.locator("#sweep-chart")).to_have_attribute("data-ready", "1")
    counts = page.evaluate("""() => { const c = Chart.getChart('sweep-chart');
        return c.data.datasets.map(d => d.data.length); }""")
    front, others = counts[0], counts[1]
    assert front >= 1 and front + others == 4
    assert page.locator(".sweep-points tr.front").count() == front

    target = page.evaluate("""() => { const c = Chart.getChart('sweep-chart');
        const el = c.getDatasetMeta(0).data[0]; const r = c.canvas.getBoundingClientRect();
        const p = c.data.datasets[0].data[0];
        return {x: r.left + el.x, y: r.top + el.y, label: p.label, apply: p.apply}; }""")
    # The label names the parameters as the form does; the point's link carries the values.
    assert target["label"].startswith("Tool context count ")
    wanted = dict(parse_qsl(urlsplit(target["apply"]).query))
    page.mouse.click(target["x"], target["y"])
    page.wait_for_url(f"**/sessions/{long_session.pk}/?*")
    assert "profile=aivax" in page.url
    expect(page.locator("#f-toolContextCount")).to_have_value(wanted["toolContextCount"])
    expect(page.locator("#f-contextMaximumSize")).to_have_value(wanted["contextMaximumSize"])
    assert f"toolContextCount={wanted['toolContextCount']}" in page.url
