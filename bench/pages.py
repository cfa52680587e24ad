"""Page-weight and import-queries targets (issue 21): `python -m bench.pages CALLS[,CALLS...]`.

For each size, a fresh SQLite file database in a temporary folder, one team and user, and the
generated CALLS-call session stored through `save_sessions` and summarised with the default
profile (`compute_default_stats`, what an import does before the session is listed), counting
the queries of both (Django's query log: an `executemany` is one statement). Then Django's test
client opens the session page (the call that sent the most, as a visitor lands) and steps one
call (the htmx call-view swap), and the bytes of both answers are reported, with the bytes of
SPREAD session pages at calls spread evenly over the session (what one page weighs depends on
what changed at its call; their sum measures how the page grows with the session).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from bench.common import bench_owner, emit, note, output_dir, setup_django

STEP = {"HX-Request": "true", "HX-Target": "div#call-view"}
SPREAD = 12  # pages of calls spread evenly over the session, summed


def setup(folder: str, calls: int) -> None:
    # The bench's own requests replay inline, whatever the size: past
    # CTXSIM_INLINE_REPLAY_CALLS a deep call is the worker's (issue 28), none runs here, and
    # the queued calls would fill the user's quota (429) before the spread pages are weighed.
    setup_django(folder, CTXSIM_INLINE_REPLAY_CALLS=str(calls))


def measure(calls: int, seed: int, team, user) -> dict:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from ctxsim.generator import generate_session
    from ctxsim.replays import page
    from ctxsim.replays.services import compute_default_stats, summary_for
    from ctxsim.replays.state import ReplaySettings
    from ctxsim.transcripts.store import save_sessions

    session = generate_session(calls, seed)
    with CaptureQueriesContext(connection) as stored:
        row = save_sessions([session], team=team, user=user, source_name="bench.jsonl")[0]
    with CaptureQueriesContext(connection) as summarised:
        compute_default_stats(row)
    # Counted now: the query log is reset at every request the client makes below.
    store_queries, stats_queries = len(stored), len(summarised)
    note(f"{calls} calls: stored in {store_queries} queries, summarised in {stats_queries}")
    client = Client()
    client.force_login(user)
    url = reverse("session-detail", args=[row.pk])
    call = page.selected_call(summary_for(row, ReplaySettings()), None)
    query = ReplaySettings().query()
    opened = client.get(f"{url}?{query}&call={call}")
    stepped = client.get(f"{url}?{query}&call={call - 1}", headers=STEP)
    for response in (opened, stepped):
        if response.status_code != 200:
            raise SystemExit(f"GET {url} answered {response.status_code}")
    # The weight of one page depends on what changed at its call; summed over calls spread
    # evenly through the session it measures how the page grows with the session.
    spread = [sum(len(client.get(f"{url}?{query}&call={(n * (calls - 1)) // (SPREAD - 1)}")
                      .content) for n in range(SPREAD))]
    if os.environ.get("CTXSIM_BENCH_KEEP_PAGES"):  # to see what a page is made of
        (output_dir() / f"page-{calls}.html").write_bytes(opened.content)
        (output_dir() / f"step-{calls}.html").write_bytes(stepped.content)
    return {"calls": calls, "messages": len(session.messages),
            "contents": len({m.content for m in session.messages}),
            "store_queries": store_queries, "stats_queries": stats_queries,
            "queries": store_queries + stats_queries, "call": call,
            "page_bytes": len(opened.content), "step_bytes": len(stepped.content),
            "spread_bytes": spread[0], "spread_pages": SPREAD}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", help="comma-separated session sizes, e.g. 2000,4000")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(n) for n in args.calls.split(",")]
    folder = tempfile.mkdtemp(prefix="ctxsim-bench-pages-")
    try:
        setup(folder, max(sizes))
        team, user = bench_owner()
        emit({"sizes": [measure(n, args.seed + n, team, user) for n in sizes]})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
