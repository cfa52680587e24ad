"""The API's JSON shapes (pydantic, through django-ninja); they are the OpenAPI schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Schema


class Error(Schema):
    detail: str


class Refused(Error):
    """A refused transcript: the one-line reason, and the facts behind it (for an unknown
    format: why each format did not match)."""

    details: list[str] = []


class Origin(Schema):
    """Where a session's transcript came from (empty strings when unknown)."""

    host: str
    cwd: str
    agent: str
    agent_version: str


class SessionOut(Schema):
    id: int
    url: str
    title: str
    format: str
    messages: int
    tool_calls: int
    tool_results: int
    warnings: list[str]
    parent: int | None = None
    sidechains: list[int] = []
    created_at: datetime
    review_status: str
    redactions: dict[str, int] = {}
    origin: Origin


class SessionDetail(SessionOut):
    source_name: str
    model_calls: int
    error_results: int
    total_bytes: int
    started_at: datetime | None = None
    ended_at: datetime | None = None
    session_keys: list[str] = []
    # The default profile's replay: peak and total tokens of raw history and of what was sent.
    tokens: dict[str, int | None]
    # What the transcript recorded about the model's own token use, when it has it.
    recorded_usage: Any = None
    calibration: Any = None


class SessionPage(Schema):
    count: int
    page: int
    pages: int
    next: str | None = None
    previous: str | None = None
    results: list[SessionOut]


class JobRef(Schema):
    id: int
    url: str


class JobOut(JobRef):
    status: str
    progress: int
    message: str
    details: list[str] = []  # the reasons behind a failed import's one-line message
    file_name: str
    created_at: datetime
    finished_at: datetime | None = None
    sessions: list[SessionOut] = []


class IngestOut(Schema):
    sessions: list[SessionOut]
    format: str = ""
    warnings: list[str] = []
    redactions: dict[str, int] = {}
    outcome: str = ""


class QueuedOut(Schema):
    job: JobRef


class OverviewProgress(Schema):
    done: int
    total: int


class OverviewOut(Schema):
    """The team overview (SPEC §13): per profile the sums over the chosen sessions of what is
    stored so far; `complete` once every (session, profile) pair is."""

    sessions: int
    complete: bool
    progress: OverviewProgress
    # Per profile: `profile`, `name`, `done`, `failed`, `pending` and the summed figures
    # (tokens, costs, hit rates, failed calls, loss events, recorded and calibrated, by tool).
    profiles: list[dict[str, Any]]
    peak_histogram: dict[str, Any]
    filters: str
    cache: dict[str, Any]
