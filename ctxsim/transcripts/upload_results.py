"""Upload results kept between an upload's POST and its results page (post/redirect/get).

A batch lives in the uploader's own Django session, so nobody else can open it and reloading
its page imports nothing. Per file it holds the name, size, outcome and the ids of what the
file made; a file whose bytes the team already had also holds the stored copy that "import
again" uses. A batch pushed out by newer ones discards the copies it still holds.
"""

from __future__ import annotations

import secrets
from typing import Any

from ctxsim.teams.models import Team
from ctxsim.transcripts import services
from ctxsim.transcripts.models import ImportJob, Session

KEY = "upload_batches"
KEEP_BATCHES = 10


def store(session, team: Team, results: list[services.FileResult], format: str = "") -> str:
    """Keep the results of one upload; returns the batch's token (its results page's name)."""
    batches: dict[str, Any] = session.get(KEY, {})
    token = secrets.token_urlsafe(9)
    batches[token] = {"team": team.pk, "format": format,
                      "files": [_record(r) for r in results]}
    while len(batches) > KEEP_BATCHES:
        for record in batches.pop(next(iter(batches)))["files"]:
            services.discard_kept(record.get("kept", ""))
    session[KEY] = batches
    return token


def _record(r: services.FileResult) -> dict[str, Any]:
    return {
        "name": r.name, "size": r.size, "format": r.format, "error": r.error,
        "error_details": list(r.error_details),
        "warnings": list(r.warnings), "sha256": r.sha256,
        "sessions": [s.pk for s in r.sessions],
        "job": r.job.pk if r.job is not None else None,
        "duplicate": r.duplicate.pk if r.duplicate is not None else None,
        "kept": r.kept, "kept_redactions": dict(r.kept_redactions),
        "redactions": dict(r.redactions),
    }


def batch_team(session, token: str) -> int | None:
    """The id of the team a batch was uploaded to, or None when this session holds no such
    batch."""
    batch = session.get(KEY, {}).get(token)
    return batch["team"] if batch else None


def load(session, token: str) -> list[services.FileResult] | None:
    """The batch's results with their sessions and jobs read again (within the batch's team:
    what was deleted since is simply not listed)."""
    batch = session.get(KEY, {}).get(token)
    if batch is None:
        return None
    files = batch["files"]
    ids = {pk for f in files for pk in f["sessions"]} | {f["duplicate"] for f in files
                                                         if f["duplicate"]}
    sessions = Session.objects.filter(team_id=batch["team"]).in_bulk(ids)
    jobs = ImportJob.objects.filter(team_id=batch["team"]).select_related("user").in_bulk(
        [f["job"] for f in files if f["job"]])
    results = []
    for f in files:
        result = services.FileResult(
            name=f["name"], size=f["size"], format=f["format"], error=f["error"],
            error_details=f.get("error_details", []),
            warnings=f["warnings"], sha256=f["sha256"], kept=f["kept"],
            redactions=f.get("redactions", {}),
            sessions=[sessions[pk] for pk in f["sessions"] if pk in sessions],
            job=jobs.get(f["job"]), duplicate=sessions.get(f["duplicate"]),
        )
        if f["duplicate"] and result.duplicate is None:
            # The earlier session was deleted since (an unsaved stand-in: no pk, no link).
            result.duplicate = Session(title="a session deleted since")
        results.append(result)
    return results


def take_kept(session, token: str, index: int) -> dict[str, Any] | None:
    """Remove and return what "import again" needs for file `index` of the batch (its kept
    copy, name, size, hash and the forced format), or None when it was used or never kept."""
    batches = session.get(KEY, {})
    batch = batches.get(token)
    if batch is None or not 0 <= index < len(batch["files"]):
        return None
    record = batch["files"][index]
    if not record.get("kept"):
        return None
    taken = {**record, "format": batch["format"], "team": batch["team"]}
    record["kept"] = ""
    session[KEY] = batches  # a nested change: store it again so the session is saved
    return taken
