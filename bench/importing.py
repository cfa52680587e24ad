"""Import targets (SPEC §9): `python -m bench.importing parse|import|store PATH`.

Each probe runs in its own interpreter and reports its time and its peak memory above the
interpreter's own (ru_maxrss high-water mark after imports, before the file is touched):
- `parse`: the baseline, every line of the file through the standard `json.loads`;
- `import`: `ctxsim.importers.load(path)`, the file into canonical sessions (no database);
- `store`: the same sessions written by `save_sessions` into a fresh SQLite database in a
  temporary folder (informational: the database write time).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

from bench.common import emit


def peak_bytes() -> int:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def parse(path: Path) -> dict:
    loads = json.loads
    lines = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                loads(line)
                lines += 1
    return {"lines": lines}


def load(path: Path) -> dict:
    from ctxsim.importers import load as import_file

    result = import_file(path)
    messages = sum(len(s.messages) for s in result.sessions)
    return {"format": result.format, "sessions": len(result.sessions), "messages": messages,
            "_keep": result}


def store(path: Path) -> dict:
    folder = tempfile.mkdtemp(prefix="ctxsim-bench-db-")
    os.environ["DATABASE_URL"] = f"sqlite:///{folder}/db.sqlite3"
    os.environ["MEDIA_ROOT"] = f"{folder}/media"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxsim.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from ctxsim.importers import load as import_file
    from ctxsim.teams.models import Team
    from ctxsim.transcripts.store import save_sessions

    call_command("migrate", verbosity=0)
    team = Team.objects.create(name="Bench", slug="bench")
    sessions = import_file(path).sessions
    start = time.perf_counter()
    rows = save_sessions(sessions, team=team, source_name=path.name)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "sessions": len(rows),
            "db_bytes": (Path(folder) / "db.sqlite3").stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("probe", choices=["parse", "import", "store"])
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.probe == "store":
        emit(store(args.path))
        return
    import ctxsim.importers  # noqa: F401  (imported before the baseline is taken)

    gc.collect()
    baseline = peak_bytes()
    start = time.perf_counter()
    outcome = (parse if args.probe == "parse" else load)(args.path)
    seconds = time.perf_counter() - start
    peak = peak_bytes() - baseline
    outcome.pop("_keep", None)
    emit({"seconds": seconds, "peak_bytes": peak, "file_bytes": args.path.stat().st_size,
          **outcome})


if __name__ == "__main__":
    main()
