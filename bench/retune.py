"""Re-tune target (SPEC §9): `python -m bench.retune CALLS REPS`.

A fresh SQLite file database in a temporary folder (migrated), one team and user, and the
generated CALLS-call session stored through `save_sessions`. Django's test client then asks for
the session page's replay partial as htmx does after a threshold change
(`HX-Request: true`, `HX-Target: section#replay`). Each repetition picks a value of
`CHATCLI_TOOL_RESULT_MAX_CHARS` never asked before (a replay-cache miss: the request replays),
then repeats that same request three times (served from the replay cache). The default profile
is requested once first, as opening the page would.

"Served from the replay cache" means the replay's results come from the replay cache (the
stored summary) and nothing else: before each of those requests the process forgets the
rendered call views and the replays it keeps in memory (`REPLAYS.forget_replays()`, the Django
cache), as a request landing on another worker process would. The loaded session and its token
counts stay, for both kinds of request: they are the replay's inputs, not its results.

`--first` (the `retune-first` target, issue 21): each repetition stores a new generated session
(seed + repetition), opens its page once with the default profile (the first open: its replay
counts the transcript and makes the default's previews and stubs), then asks once for
`CHATCLI_TOOL_RESULT_MAX_CHARS=6001`, a threshold whose previews were never made (every result
between 6,001 and 20,000 bytes is spilled for the first time, at every call), and then for that
same request three times from the replay cache as above. The target is the first against the
median of the cached ones.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

from bench.common import bench_owner, emit, median, note, setup_django, timed

HTMX = {"HX-Request": "true", "HX-Target": "section#replay"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("calls", type=int)
    parser.add_argument("reps", type=int)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--first", action="store_true",
                        help="a new session per repetition, thresholds never asked before")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="ctxsim-bench-retune-")
    try:
        emit(run(folder, args.calls, args.reps, args.seed, first=args.first))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(folder: str, calls: int, reps: int, seed: int, *, first: bool = False) -> dict:
    # The request itself must replay: sessions past CTXSIM_INLINE_REPLAY_CALLS (the 2,000-call
    # one of `--first`) would hand the replay to the worker and answer with its progress.
    setup_django(folder, CTXSIM_INLINE_REPLAY_CALLS=str(calls))
    from django.core.cache import cache
    from django.test import Client
    from django.urls import reverse

    from ctxsim.generator import generate_session
    from ctxsim.pipeline import token_pool, tokens
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.state import ReplaySettings
    from ctxsim.transcripts.store import save_sessions

    team, user = bench_owner()
    counter = ReplaySettings().counter
    tokens.get_encoding(counter)  # once per process, outside the timings
    token_pool.warm_up(counter)

    def store(rep: int) -> str:
        session = generate_session(calls, seed + rep)
        row = save_sessions([session], team=team, user=user, source_name="bench.jsonl")[0]
        note(f"stored a {calls}-call session ({row.message_count} messages)")
        return reverse("session-detail", args=[row.pk])

    client = Client()
    client.force_login(user)

    def get(url: str, query: str, forget: bool = False) -> float:
        if forget:
            REPLAYS.forget_replays()
            cache.clear()
        seconds, response = timed(lambda: client.get(f"{url}?{query}", headers=HTMX))
        if (response.status_code != 200 or b'id="replay"' not in response.content
                or b"replay-pending" in response.content):
            raise SystemExit(f"GET {url}?{query} answered {response.status_code}"
                             " (or with a background replay's progress)")
        return seconds

    url = store(0)
    warm = get(url, "profile=chatcli")
    cold_times, cached_times = [], []
    for rep in range(reps):
        if first and rep:
            url = store(rep)
            get(url, "profile=chatcli")
        # A value never asked before: a replay-cache miss.
        value = 6001 if first else 6001 + 1237 * rep
        query = f"profile=chatcli&env.present=1&env.CHATCLI_TOOL_RESULT_MAX_CHARS={value}"
        cold_times.append(get(url, query))
        cached = [get(url, query, forget=True) for _ in range(3)]
        cached_times.append(median(cached))
        note(f"rep {rep + 1}/{reps}: threshold {value}: {cold_times[-1]:.3f}s, "
             f"cached {cached_times[-1]:.3f}s")
    return {"calls": calls, "first_open": warm, "cold_times": cold_times,
            "cached_times": cached_times, "cold": median(cold_times),
            "cached": median(cached_times)}


if __name__ == "__main__":
    main()
