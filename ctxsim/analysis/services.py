"""The cache & information-loss page and sweeps: from a request's query to pure insights.

Settings come from `ctxsim.replays.state`, sessions from `ctxsim.replays.services`; the
analysis itself is `ctxsim.insights` (pure). Sweeps small enough run in the request; larger
ones go to the task worker (`tasks.py`, imported here, never importing this module) and
record their progress on the `Sweep` row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings as django_settings
from django.db import transaction
from django.http import QueryDict
from django.urls import reverse

# The page's cache choice is part of this module's API (the views call it through here).
from ctxsim.analysis.choices import CacheChoice, cache_choice
from ctxsim.analysis.choices import all_lifetimes as all_lifetimes
from ctxsim.analysis.choices import model_options as model_options
from ctxsim.analysis.models import Sweep
from ctxsim.analysis.tasks import run_sweep, run_sweep_job
from ctxsim.insights import sweep as sweeps
from ctxsim.insights.prices import CacheRule
from ctxsim.insights.recorded import RecordedComparison, compare
from ctxsim.insights.report import ProfileInsights, analyse
from ctxsim.pipeline.calibration import calibrate
from ctxsim.pipeline.params import env_var_of
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.spill import NullSpillSink
from ctxsim.pipeline.usage import recorded_per_call
from ctxsim.replays import profiles
from ctxsim.replays import services as replays
from ctxsim.replays.limits import replay_slot
from ctxsim.replays.state import ReplaySettings, settings_from_query

DEFAULT_PROFILES = ("none", "chatcli", "aivax")
# Sweeps whose work (combinations x model calls) is above this run in the task worker.
INLINE_SWEEP_WORK = 1200

# Call replays (calls × profiles) one insights page may run in a request.
DEFAULT_INSIGHTS_MAX_CALLS = 40_000


# --- the cache & information-loss page ---------------------------------------------------------


@dataclass
class Column:
    """One profile's replay seen through the cache."""

    ref: str
    label: str
    settings: ReplaySettings
    insights: ProfileInsights

    @property
    def query(self) -> str:
        return self.settings.query()

    @property
    def hit_percent(self) -> float:
        return self.insights.hit_rate * 100

    @property
    def breaks(self) -> list[dict[str, Any]]:
        """Every break, with its compaction event (break-even) when it is one."""
        events = {e.call: e for e in self.insights.events}
        return [{"row": r, "event": events.get(r.index)} for r in self.insights.breaks]


def profile_refs(query: QueryDict) -> tuple[list[str], bool]:
    """The profiles to show side by side, and whether the page's own settings lead them (the
    session page links here with its query, so its tuned parameters get a column)."""
    refs = [r for r in query.getlist("profiles") if r] or list(DEFAULT_PROFILES)
    return list(dict.fromkeys(refs)), "profile" in query


def insight_columns(session, query: QueryDict, rule: CacheRule, canonical=None, *,
                    user: Any = None) -> tuple[list[Column], dict[str, str]]:
    """Replay the session under each chosen profile and simulate the cache over each.

    At most CTXSIM_INSIGHTS_MAX_CALLS calls are replayed in one request (calls × profiles):
    past that nothing is, and the errors say why (issue 20 item 5). With `user` the replays
    take one of their replay slots (`replays.limits`)."""
    refs, with_current = profile_refs(query)
    errors: dict[str, str] = {}
    wanted: list[tuple[str, ReplaySettings]] = []
    if with_current:
        current, problems = settings_from_query(query, session.team)
        errors.update(problems)
        if current.config or current.stages is not None or current.profile_ref not in refs:
            wanted.append((f"current: {current.profile.name}", current))
    for ref in refs:
        settings, problems = settings_from_query({"profile": ref}, session.team)
        if problems:
            errors[f"profiles ({ref})"] = problems.get("profile", "bad profile")
            continue
        wanted.append((settings.profile.name, settings))
    limit = getattr(django_settings, "CTXSIM_INSIGHTS_MAX_CALLS", DEFAULT_INSIGHTS_MAX_CALLS)
    work = len(wanted) * max(session.model_call_count, 1)
    if work > limit:
        errors["profiles"] = (
            f"this session is too long to compare {len(wanted)} profile(s) here: "
            f"{session.model_call_count} calls × {len(wanted)} = {work} call replays, over "
            f"the {limit} one page may run; choose fewer profiles, or run a sweep (it runs in "
            "the background)")
        return [], errors
    canonical = canonical or replays.canonical_session(session)
    columns = []
    with replay_slot(user):
        for label, settings in wanted:
            rep = replay(canonical, settings.run_config(), sink=NullSpillSink())
            columns.append(Column(settings.profile_ref, label, settings, analyse(rep, rule)))
    return columns, errors


@dataclass
class RecordedView:
    """The provider's recorded cache figures beside the simulation of profile `none` (the
    session's own behaviour, SPEC §11), per call and in total."""

    comparison: RecordedComparison
    rows: list[dict[str, Any]]


def recorded_view(session, columns: list[Column], rule: CacheRule,
                  canonical=None) -> RecordedView | None:
    """None when the transcript records no usage per call."""
    canonical = canonical or replays.canonical_session(session)
    recorded = recorded_per_call(canonical.messages)
    if not any(recorded):
        return None
    column = next((c for c in columns if c.ref == "none"), None)
    settings = column.settings if column else settings_from_query({"profile": "none"},
                                                                   session.team)[0]
    if column is None:
        rep = replay(canonical, settings.run_config(), sink=NullSpillSink())
        insights = analyse(rep, rule)
    else:
        insights = column.insights
    calls = insights.calls
    per_call = [recorded[i] if i < len(recorded) else None for i in range(len(calls))]
    rc = settings.run_config()
    cal = calibrate(canonical.messages, settings.counter, image_rule=rc.values["image_rule"],
                    tools=canonical.tools, response_schema=canonical.response_schema,
                    provider=canonical.meta.get("provider"))
    comparison = compare(per_call, calls, rule, cal.a if cal else None, cal.b if cal else None)
    if comparison is None:
        return None
    simulated = {c.index: c for c in calls}
    rows = [{"call": r.call_index, "recorded": r, "simulated": simulated.get(r.call_index)}
            for r in comparison.calls]
    return RecordedView(comparison, rows)


def profile_options(team) -> list[tuple[str, str]]:
    return profiles.profile_choices(team)


def call_link(session, column: Column, call: int) -> str:
    """The lead's session page at one call, under this column's settings."""
    return f"{reverse('session-detail', args=[session.pk])}?{column.settings.query(call)}"


# --- sweeps ------------------------------------------------------------------------------------


@dataclass
class SweepForm:
    settings: ReplaySettings
    params: list[sweeps.SweepParam]
    cache: CacheChoice
    values: dict[str, str]

    @property
    def axis_fields(self) -> list[dict[str, Any]]:
        return [{"n": n, "optional": n == "2", **{f: self.values[f"{f}{n}"] for f in AXIS_FIELDS}}
                for n in ("1", "2")]


AXIS_FIELDS = ("param", "start", "stop", "step")


def sweep_form(session, query: Mapping[str, Any]) -> tuple[SweepForm, dict[str, str]]:
    settings, errors = settings_from_query(query, session.team)
    cache, cache_errors = cache_choice(query)
    errors.update(cache_errors)
    params = sweeps.sweepable(settings.effective_stages)
    values = {f"{f}{n}": query.get(f"{f}{n}", "") for n in (1, 2) for f in AXIS_FIELDS}
    if not values["param1"] and params:
        first = params[0]
        values.update(param1=first.name, **_default_range(first, "1"))
    return SweepForm(settings, params, cache, values), errors


def _default_range(param: sweeps.SweepParam, n: str) -> dict[str, str]:
    base = param.default or 4
    step = max(1, base // 2)
    return {f"start{n}": str(max(1, base - step)), f"stop{n}": str(base + step),
            f"step{n}": str(step)}


def parse_axes(form: SweepForm, query: Mapping[str, Any]) -> tuple[list[sweeps.Axis],
                                                                   dict[str, str]]:
    known = {p.name for p in form.params}
    axes, errors = [], {}
    for n in (1, 2):
        name = (query.get(f"param{n}") or "").strip()
        if not name:
            if n == 1:
                errors["param1"] = "choose a parameter to sweep"
            continue
        if name not in known:
            errors[f"param{n}"] = f"{name!r} is not an integer parameter of this profile"
            continue
        if any(a.name == name for a in axes):
            errors[f"param{n}"] = "choose two different parameters"
            continue
        numbers = []
        for field in ("start", "stop", "step"):
            text = (query.get(f"{field}{n}") or "").strip()
            try:
                numbers.append(int(text))
            except ValueError:
                errors[f"{field}{n}"] = f"{text!r} is not a whole number"
        if len(numbers) == 3:
            try:
                axes.append(sweeps.axis(name, *numbers))
            except sweeps.SweepError as exc:
                errors[f"param{n}"] = next(iter(exc.errors.values()))
    if axes and not errors:
        try:
            sweeps.grid(axes)
        except sweeps.SweepError as exc:
            errors.update(exc.errors)
    return axes, errors


def create_sweep(session, user, form: SweepForm, axes: list[sweeps.Axis]) -> Sweep:
    """Store the sweep; run it now when small, else hand it to the worker."""
    total = 1
    for a in axes:
        total *= len(a.values)
    sweep = Sweep.objects.create(
        session=session, created_by=user if user.is_authenticated else None,
        query=form.settings.query(), axes=[{"name": a.name, "values": list(a.values)}
                                           for a in axes],
        cache=form.cache.as_dict(), total=total,
    )
    limit = getattr(django_settings, "CTXSIM_INLINE_SWEEP_WORK", INLINE_SWEEP_WORK)
    if total * max(session.model_call_count, 1) <= limit:
        run_sweep_job(sweep.pk)
        sweep.refresh_from_db()
    else:
        _enqueue(sweep)
    return sweep


def _enqueue(sweep: Sweep) -> None:
    def send() -> None:
        result = run_sweep.enqueue(sweep.pk)
        Sweep.objects.filter(pk=sweep.pk).update(task_id=str(result.id)[:64])

    transaction.on_commit(send)


def apply_query(sweep: Sweep, values: Mapping[str, int]) -> str:
    """The session page's query with a sweep point's values as the current parameters."""
    settings, _ = settings_from_query(QueryDict(sweep.query), sweep.session.team)
    settings = settings.with_config(sweeps.with_point(settings.config, values))
    return settings.query()


def sweep_points(session, sweep: Sweep) -> list[dict[str, Any]]:
    """The points with their labels and apply links, for the table and the chart."""
    page = reverse("session-detail", args=[session.pk])
    out = []
    for n, p in enumerate(sweep.points):
        label = ", ".join(f"{_short(k)}={v}" for k, v in p["values"].items())
        out.append({**p, "n": n, "label": label, "lost": p["lost_references"] + p["rereads"],
                    "apply": f"{page}?{apply_query(sweep, p['values'])}"})
    return out


def _short(name: str) -> str:
    return (env_var_of(name) or name).removeprefix("CHATCLI_")


def chart_data(points: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [p for p in points if not p["error"]]
    return {
        "points": [{"x": p["sent_tokens"], "y": round(p["cost"], 6), "lost": p["lost"],
                    "label": p["label"], "apply": p["apply"], "front": p["front"]} for p in ok],
        "maxLost": max((p["lost"] for p in ok), default=0),
    }


MY_FIELDS = ("profiles", "model", "lifetime", "price")


def state_fields(query: QueryDict) -> list[tuple[str, str]]:
    """The session page's settings carried along (hidden fields), without this page's own."""
    return [(k, v) for k, values in query.lists() if k not in MY_FIELDS for v in values]


def insights_query(cache: CacheChoice, refs: list[str], extra: str = "") -> str:
    params = [("profiles", r) for r in refs] + cache.query()
    return urlencode(params) + (f"&{extra}" if extra else "")

