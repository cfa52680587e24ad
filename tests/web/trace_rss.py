"""Run by `test_trace_rss.py` in fresh processes (acceptance 4 of issue 20): `setup` migrates a
file database and stores a generated session there; `measure` downloads that session's full
trace through the view in a process that did nothing else, consuming the streamed response
chunk by chunk without keeping it, and prints one JSON line: the bytes received and the peak
RSS growth over the process's RSS before the request.

The peak is read two ways, and the larger one counts: the kernel's high-water mark
(`VmHWM`, reset before the request through /proc/self/clear_refs) and a thread sampling
`VmRSS` every 20 ms.
"""

from __future__ import annotations

import json
import os
import sys
import threading


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def setup(calls: int) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from ctxsim.generator import generate_session
    from ctxsim.teams.models import Membership, Role, Team
    from ctxsim.transcripts.store import save_sessions

    call_command("migrate", verbosity=0)
    team = Team.objects.create(name="Alpha", slug="alpha")
    user = get_user_model().objects.create_user(username="viewer", password="viewer-pass-123")
    Membership.objects.create(team=team, user=user, role=Role.VIEWER)
    row = save_sessions([generate_session(calls, seed=1)], team=team, user=user)[0]
    print(json.dumps({"session": row.pk, "calls": row.model_call_count}))


def measure(session_id: int, query: str) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    client = Client()
    client.force_login(get_user_model().objects.get(username="viewer"))
    url = reverse("session-trace", args=[session_id]) + "?" + query
    import gc

    gc.collect()
    before = _status_kb("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM to the current RSS
        hwm = True
    except OSError:
        hwm = False
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _status_kb("VmRSS"))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    response = client.get(url, secure=True)  # DEBUG off: plain HTTP is redirected
    size, first = 0, b""
    for chunk in response.streaming_content:
        if not first:
            first = bytes(chunk[:200])
        size += len(chunk)
    response.close()
    done.set()
    sampler.join()
    high = max(peak[0], _status_kb("VmHWM") if hwm else 0)
    print(json.dumps({"status": response.status_code, "bytes": size,
                      "growth_mb": (high - before) / 1024, "before_mb": before / 1024,
                      "streaming": response.streaming, "head": first.decode("utf-8", "replace")}))


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxsim.settings")
    if sys.argv[1] == "setup":
        setup(int(sys.argv[2]))
    else:
        measure(int(sys.argv[2]), sys.argv[3])
