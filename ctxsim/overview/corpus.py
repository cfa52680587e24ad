"""A corpus sweep's points: each grid point's figures summed over the sessions, and the
Pareto front of total cost against information lost. Pure Python over the parts' points."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxsim.insights import sweep as sweeps

SUMMED = ("sent_tokens", "cost", "no_cache_cost", "lost_references", "rereads",
          "failed_calls", "calls")


def summed_points(axes: Sequence[Mapping[str, Any]],
                  parts: Sequence[Sequence[Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One entry per grid point (grid order): its values, the sums over `parts` (each a
    session's points in grid order), how many sessions it failed on, and whether it is on the
    front. A point that failed on any session is never on the front: its sums miss that
    session."""
    grid = sweeps.grid([sweeps.Axis(a["name"], tuple(a["values"])) for a in axes])
    out = []
    for i, values in enumerate(grid):
        point: dict[str, Any] = {"values": values, "errors": 0, "sessions": 0,
                                 **dict.fromkeys(SUMMED, 0)}
        for part in parts:
            if i >= len(part):
                continue
            if part[i].get("error"):
                point["errors"] += 1
                point["error"] = part[i]["error"]
                continue
            point["sessions"] += 1
            for name in SUMMED:
                point[name] += part[i].get(name, 0)
        point["cost"] = round(point["cost"], 9)
        point["lost"] = point["lost_references"] + point["rereads"]
        out.append(point)
    for i in pareto_front([(p["cost"], p["lost"]) if not p["errors"] else None for p in out]):
        out[i]["front"] = True
    for p in out:
        p.setdefault("front", False)
    return out


def pareto_front(scores: Sequence[tuple[float, int] | None]) -> list[int]:
    """Indices of the scores no other beats: at most as costly and as lossy, strictly less of
    one (None: a failed point, never on the front)."""
    scored = [(i, s) for i, s in enumerate(scores) if s is not None]
    return [i for i, a in scored
            if not any(b[0] <= a[0] and b[1] <= a[1] and b != a for _, b in scored)]
