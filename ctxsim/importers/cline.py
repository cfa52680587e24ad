"""Cline task folders (`saoudrizwan.claude-dev/tasks/<taskId>/`); the mapping, shared with
Roo Code, is in `cline_common`. A task history that shows nothing only Roo Code writes is
read as Cline's (Cline is the original, Roo Code its fork)."""

from __future__ import annotations

from ctxsim.pipeline.messages import Session

from .cline_common import detect_as, parse_as
from .source import Probe, Source

NAME = "cline"
ACCEPTS_ARCHIVE = True


def detect(probe: Probe) -> bool | str:
    return detect_as(probe, NAME)


def parse(source: Source) -> list[Session]:
    return parse_as(source, NAME, "Cline")
