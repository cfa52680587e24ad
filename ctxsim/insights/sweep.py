"""Parameter sweeps: replay a session for every combination of one or two integer parameters
and find the Pareto front of tokens sent, cache-adjusted cost and information lost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.params import ENV_BY_NAME, PARAMS, ParamError, env_field, env_var_of
from ctxsim.pipeline.profiles import Profile, param_specs, resolve
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.spill import NullSpillSink

from .prices import CacheRule
from .report import ProfileInsights, analyse

MAX_VALUES = 25  # per axis
MAX_POINTS = 400


@dataclass(frozen=True)
class SweepParam:
    """An integer parameter a sweep can vary: a config key, or `env.NAME` for ChatCLI."""

    name: str
    label: str
    default: int | None


def sweepable(stages: Sequence[tuple[str, str]]) -> list[SweepParam]:
    """The integer parameters of a stage list, in form order (ChatCLI's env knobs included)."""
    out: list[SweepParam] = []
    for spec in param_specs(tuple(stages)):
        if spec.kind == "env":
            out += [SweepParam(env_field(v.name), f"{v.label} ({v.name})", v.default)
                    for v in spec.env_vars]
        elif spec.kind in ("int", "optional-int"):
            out.append(SweepParam(spec.name, spec.label, spec.default))
    return out


def param_label(name: str) -> str:
    """What the form calls a swept parameter: its label ("Per-result limit"), not its key."""
    var = env_var_of(name)
    if var is not None:
        return ENV_BY_NAME[var].label if var in ENV_BY_NAME else var
    return PARAMS[name].label if name in PARAMS else name


def point_label(values: Mapping[str, Any]) -> str:
    """A point as a person reads it: "Per-result limit 20,000, Tool context count 3"."""
    return ", ".join(f"{param_label(k)} {v:,}" if isinstance(v, int) else f"{param_label(k)} {v}"
                     for k, v in values.items())


def one_outcome(points: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> bool:
    """Whether every point that did not fail came out the same on `keys` (a parameter that
    changes nothing in what was swept), with more than one such point."""
    outcomes = {tuple(p[k] for k in keys) for p in points if not p.get("error")}
    return len(outcomes) == 1 and sum(1 for p in points if not p.get("error")) > 1


def merge_alike(points: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """Chart points with one point per outcome: the first of points that came out alike,
    its label saying how many more did ("… and 11 more values with the same result")."""
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    count: dict[tuple[Any, ...], int] = {}
    for p in points:
        key = tuple(p[k] for k in keys)
        first.setdefault(key, p)
        count[key] = count.get(key, 0) + 1
    return [{**p, "label": p["label"] + (f" and {count[k] - 1} more value"
                                         f"{'s' if count[k] > 2 else ''} with the same result"
                                         if count[k] > 1 else "")}
            for k, p in first.items()]


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[int, ...]


class SweepError(ParamError):
    """Bad axes or grid: a parameter error, per field, raised before anything is replayed."""


def axis(name: str, start: int, stop: int, step: int) -> Axis:
    """start, start + step, ... up to stop (inclusive); at most MAX_VALUES values."""
    if step <= 0:
        raise SweepError({name: "the step must be a positive whole number"})
    if stop < start:
        raise SweepError({name: "the range ends before it starts"})
    # Counted before anything is built: a hostile stop must cost nothing (issue 20 item 3).
    count = (stop - start) // step + 1
    if count > MAX_VALUES:
        raise SweepError({name: f"{count} values; at most {MAX_VALUES} per parameter"})
    return Axis(name, tuple(range(start, stop + 1, step)))


def grid(axes: Sequence[Axis]) -> list[dict[str, int]]:
    points = [dict(zip([a.name for a in axes], combo, strict=True))
              for combo in product(*(a.values for a in axes))]
    if len(points) > MAX_POINTS:
        raise SweepError({"axes": f"{len(points)} combinations; at most {MAX_POINTS}"})
    return points


def with_point(config: Mapping[str, Any], point: Mapping[str, int]) -> dict[str, Any]:
    """The config with the point's values set (env knobs as the text ChatCLI reads)."""
    out = dict(config)
    for name, value in point.items():
        var = env_var_of(name)
        if var is not None:
            out["env"] = {**out.get("env", {}), var: str(value)}
        else:
            out[name] = value
    return out


@dataclass
class SweepPoint:
    values: dict[str, int]
    sent_tokens: int = 0  # input tokens summed over the calls
    cost: float = 0.0  # cache-adjusted, dollars
    no_cache_cost: float = 0.0
    hit_rate: float = 0.0
    lost_references: int = 0
    rereads: int = 0
    failed_calls: int = 0
    error: str = ""
    front: bool = False

    @property
    def lost(self) -> int:
        """Both kinds of evidence that something the agent needed had been dropped."""
        return self.lost_references + self.rereads

    def as_dict(self) -> dict[str, Any]:
        return {
            "values": self.values, "sent_tokens": self.sent_tokens, "cost": self.cost,
            "no_cache_cost": self.no_cache_cost, "hit_rate": self.hit_rate,
            "lost_references": self.lost_references, "rereads": self.rereads,
            "failed_calls": self.failed_calls, "error": self.error, "front": self.front,
        }


@dataclass
class SweepInput:
    """A session and the settings a sweep varies around."""

    messages: Sequence[Message]
    profile: str | Profile
    stages: Sequence[tuple[str, str]] | None = None
    config: Mapping[str, Any] = field(default_factory=dict)
    tools: Any = None
    response_schema: Any = None
    # The transcript's format and meta: a built-in agent profile takes its release's era.
    transcript_format: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)


class SweepPaused(Exception):  # noqa: N818 - a request, not an error
    """Raised between two points when the sweep was asked to stop; `points` are the ones
    evaluated so far (in grid order), for a later run to resume from."""

    def __init__(self, points: list[SweepPoint]) -> None:
        super().__init__(f"stopped after {len(points)} points")
        self.points = points


# Replays a point's settings and simulates the cache over them (or reads a stored result).
Analyser = Callable[[Mapping[str, int]], ProfileInsights]


def evaluate(source: SweepInput, point: Mapping[str, int], rule: CacheRule,
             analysed: Analyser | None = None) -> SweepPoint:
    out = SweepPoint(dict(point))
    try:
        rc = resolve(source.profile, with_point(source.config, point), source.stages)
        rc = rc.for_session(source.transcript_format, source.meta)
    except ParamError as exc:
        out.error = str(exc)
        return out
    if analysed is not None:
        insights = analysed(point)
    else:
        rep = replay(source.messages, rc, sink=NullSpillSink(), tools=source.tools,
                     response_schema=source.response_schema)
        insights = analyse(rep, rule)
    out.sent_tokens = insights.input_tokens
    out.cost = insights.cost
    out.no_cache_cost = insights.no_cache_cost
    out.hit_rate = insights.hit_rate
    out.lost_references = len(insights.loss.lost)
    out.rereads = len(insights.loss.rereads)
    out.failed_calls = sum(1 for c in insights.calls if c.failed)
    return out


def run_sweep(source: SweepInput, axes: Sequence[Axis], rule: CacheRule,
              progress: Callable[[int, int], None] | None = None, *,
              analysed: Analyser | None = None,
              should_stop: Callable[[], bool] | None = None,
              done: Sequence[SweepPoint] = ()) -> list[SweepPoint]:
    """Evaluate every combination in grid order, reporting (done, total) after each, then
    mark the Pareto front. Points in `done` (an earlier run's, by their values) are not
    evaluated again; `should_stop` is asked before each point, and a yes raises SweepPaused
    with the points so far."""
    points = grid(axes)
    known = {tuple(sorted(p.values.items())): p for p in done}
    out: list[SweepPoint] = []
    for n, point in enumerate(points, start=1):
        earlier = known.get(tuple(sorted(point.items())))
        if earlier is None:
            if should_stop is not None and should_stop():
                raise SweepPaused(out)
            earlier = evaluate(source, point, rule, analysed)
        earlier.front = False
        out.append(earlier)
        if progress is not None:
            progress(n, len(points))
    for i in pareto_front(out):
        out[i].front = True
    return out


def point_from_dict(data: Mapping[str, Any]) -> SweepPoint:
    """A point as `SweepPoint.as_dict` stored it."""
    return SweepPoint(**{k: v for k, v in data.items() if k in SweepPoint.__dataclass_fields__})


def pareto_front(points: Sequence[SweepPoint]) -> list[int]:
    """Indices of the points no other point beats: at most as many tokens, as much cost and as
    much loss, and strictly less of one. Failed points are never on the front."""
    scored = [(i, (p.sent_tokens, p.cost, p.lost)) for i, p in enumerate(points) if not p.error]
    front = []
    for i, a in scored:
        dominated = any(
            all(y <= x for x, y in zip(a, b, strict=True)) and b != a for _, b in scored
        )
        if not dominated:
            front.append(i)
    return front
