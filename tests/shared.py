"""Where the shared reference material lives, and how tests that need it skip without it.

`../shared` (beside the checkout) exists on developer machines and in CI, never for users.
Tests read it in place and skip with a visible reason when it is absent. `CTXSIM_SHARED_DIR`
points elsewhere when needed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = Path(os.environ.get("CTXSIM_SHARED_DIR", ROOT.parent / "shared"))

requires_shared = pytest.mark.skipif(
    not SHARED_DIR.is_dir(),
    reason=f"shared reference material not found at {SHARED_DIR} (set CTXSIM_SHARED_DIR)",
)


def shared_files(subdir: str, pattern: str) -> list[Path]:
    """Files under SHARED_DIR/subdir matching pattern, sorted; empty when shared is absent."""
    folder = SHARED_DIR / subdir
    return sorted(folder.glob(pattern)) if folder.is_dir() else []
