"""The comparison of two replays of one session (SPEC §7): the settings of each side, their
stored summaries, and what each sent at the chosen call (a long session's call from its
summary only: its messages are on the session page).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from django.conf import settings as django_settings

from ctxsim.pipeline.profiles import default_profile_for
from ctxsim.replays import services
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.page import call_rows, report_lines
from ctxsim.replays.run_figures import UNIT_LABELS, numbers_unit, summary
from ctxsim.replays.state import ReplaySettings, settings_from_query
from ctxsim.transcripts.models import Session


@dataclass
class Side:
    ref: str
    settings: ReplaySettings
    run: ReplayRun

    @property
    def changed(self) -> bool:
        """Whether this side runs the profile with changed stages or thresholds."""
        return bool(self.settings.config) or self.settings.stages is not None


def compare_settings(session: Session, query) -> list[tuple[str, ReplaySettings, dict]]:
    """The settings of a comparison's two sides, with their problems. Side A is the session
    page's state carried in the query (profile, stages, overrides), or profile `a` alone
    when `a` names another profile; side B is profile `b` (defaults: the session's own
    profile against none)."""
    a, b = query.get("a"), query.get("b")
    if a and a != query.get("profile"):
        query = {"profile": a}
    first, problems = settings_from_query(query, session.team,
                                          default_profile_for(session.format), session=session)
    second, problems_b = settings_from_query({"profile": b or "none"}, session.team,
                                             session=session)
    return [("a", first, problems), ("b", second, problems_b)]


def compare_sides(session: Session, query, *, user: Any = None, chosen=None):
    """The two replays of a comparison (`chosen`: `compare_settings` already made)."""
    errors: dict[str, str] = {}
    sides = []
    for key, settings, bad in chosen or compare_settings(session, query):
        if bad:
            errors[key] = "; ".join(f"{k}: {v}" for k, v in bad.items())
        sides.append(Side(settings.profile_ref, settings,
                          services.summary_for(session, settings, user=user)))
    return sides, errors


def compare_chart(sides, selected: int) -> dict[str, Any]:
    first = sides[0].run
    # One unit for both sides, the session page's: the provider's tokens when both have them.
    real = all(numbers_unit(s.run) != "raw" for s in sides)

    def shown(c: dict[str, Any], key: str) -> Any:
        return c[f"c{key}"] if real and c.get(f"c{key}") is not None else c[key]

    return {
        "labels": [c["i"] for c in first.calls],
        "raw": [shown(c, "raw") for c in first.calls],
        "series": [{"label": s.settings.profile.name,
                    "sent": [shown(c, "sent") for c in s.run.calls],
                    "failed": [c["i"] for c in s.run.calls if c["error"]]} for s in sides],
        "selected": selected,
        "counter": first.counter,
        "unit": UNIT_LABELS[numbers_unit(first) if real else "raw"],
    }


def compare_column(session: Session, side, call: int, user: Any = None) -> dict[str, Any]:
    """One side of the comparison: its summary and what it sent at the chosen call."""
    index = min(call, len(side.run.calls) - 1)
    if (session.model_call_count > django_settings.CTXSIM_INLINE_REPLAY_CALLS
            and not services.call_is_at_hand(session, side.settings, index)):
        # A long session is never replayed by the request (issue 28 item 4): the call's
        # figures from the stored summary; its messages are on the session page.
        figures = side.run.calls[index]
        return {"side": side, "summary": summary(side.run), "rows": [], "counts": {},
                "call": SimpleNamespace(sent_tokens=figures["sent"], error=figures["error"]),
                "reports": [], "messages_elsewhere": True}
    detail = services.call_detail(session, side.settings, side.run, index, user)
    return {"side": side, "summary": summary(side.run), "rows": call_rows(detail),
            "counts": detail.view.counts, "call": detail.call,
            "reports": report_lines(detail.call)}
