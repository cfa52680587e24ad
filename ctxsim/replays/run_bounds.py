"""What one stored replay may take in the database (issue 20 item 1): a bound by its number
of calls, and the shrinking of its per-call reports that keeps it under (`services` stores a
run after `fit_stored`)."""

from __future__ import annotations

import json
import logging
from typing import Any

logger = logging.getLogger(__name__)

# Its per-call summaries, totals and packed spills, as JSON text. 300 calls: 664 KB (about
# 0.9 KB a call is usual).
RUN_BYTES_BASE = 64 * 1024
RUN_BYTES_PER_CALL = 2 * 1024


def run_byte_bound(calls: int) -> int:
    """The most bytes one stored replay of `calls` model calls may take (see `fit_stored`)."""
    return RUN_BYTES_BASE + RUN_BYTES_PER_CALL * calls


def stored_bytes(calls: list[dict[str, Any]], totals: dict[str, Any], packed: bytes) -> int:
    return len(json.dumps([calls, totals], ensure_ascii=False, default=str)) + len(packed)


def fit_stored(calls: list[dict[str, Any]], totals: dict[str, Any], packed: bytes) -> None:
    """Shrink the per-call reports until the run fits `run_byte_bound`: lists become their
    length (`<key>_count`, as `analysis.MAX_LIST_IN_SUMMARY` does past 20 entries), then long
    texts are cut to 200 characters. Usual reports are far below the bound and untouched."""
    bound = run_byte_bound(len(calls))
    if stored_bytes(calls, totals, packed) <= bound:
        return
    for cut in (_lists_to_counts, _cut_texts):
        for call in calls:
            for report in call["reports"].values():
                cut(report)
        if stored_bytes(calls, totals, packed) <= bound:
            return
    logger.warning("a replay of %d calls stores %d bytes, over its bound of %d", len(calls),
                   stored_bytes(calls, totals, packed), bound)


def _lists_to_counts(report: dict[str, Any]) -> None:
    for key, value in list(report.items()):
        if isinstance(value, list) and value:
            report.setdefault(f"{key}_count", len(value))
            report[key] = []


def _cut_texts(report: dict[str, Any]) -> None:
    for key, value in list(report.items()):
        if isinstance(value, str) and len(value) > 200:
            report[key] = value[:200] + "…"
