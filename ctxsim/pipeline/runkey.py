"""The run key: one hash of everything that decides a replay's output.

Two settings that resolve to the same stage list and values (a saved profile equal to a
built-in one, an override equal to the default) share one key, so a cached result is reused.
"""

from __future__ import annotations

import hashlib
import json

from .profiles import RunConfig

# Bump when the engine's output for the same settings changes, so cached replays are redone.
ENGINE_VERSION = "4"  # 4: the token model (anchored limits, real tokens; SPEC §11 2026-12)


def run_key(rc: RunConfig) -> str:
    """SHA-256 (hex) of the engine version, the stage list and every parameter value.

    Invariant: equal resolved settings give equal keys; values computed from others (the
    `_`-prefixed ones, like the effective env) are left out, as they add nothing."""
    values = {k: v for k, v in rc.values.items() if not k.startswith("_")}
    blob = json.dumps(
        {"v": ENGINE_VERSION, "stages": rc.stages, "values": values},
        sort_keys=True, default=list,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()
