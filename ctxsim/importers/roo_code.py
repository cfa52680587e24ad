"""Roo Code task folders (`rooveterinaryinc.roo-cline/tasks/<uuid>/`), told from Cline's by
content (`cline_common.flavour`): Roo's message flags (`isSummary`, `condenseParent`,
`truncationParent`, `reasoning_details`, …), its UI says (`condense_context`,
`sliding_window_truncation`, `checkpoint_saved`), its own tools (`apply_diff`, `switch_mode`,
`update_todo_list`, …), the `<slug>` mode line of its environment details, or the storage
folder's name in an archive. Anything else is Cline's."""

from __future__ import annotations

from ctxsim.pipeline.messages import Session

from .cline_common import detect_as, parse_as
from .source import Probe, Source

NAME = "roo-code"
ACCEPTS_ARCHIVE = True


def detect(probe: Probe) -> bool | str:
    return detect_as(probe, NAME)


def parse(source: Source) -> list[Session]:
    return parse_as(source, NAME, "Roo Code")
