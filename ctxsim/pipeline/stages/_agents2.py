"""What the part-2 agent stages share (SPEC-agents-2): the figure an agent's limit compares,
the recorded usage it reads, version eras, recorded summaries, and the common report shape.

- `compared_tokens(...)` is the one place a limit's figure is computed (SPEC-agents
  §2.5.0.10): `anchored` (the default) = `token_model.compared`, the provider's tokens of the
  view at the step's call (the bill of that call or the latest earlier one, plus what the
  profile changed since), exactly the counter when the session records no usage; `counter`
  = ctxsim's counter on the prompt about to be sent; `usage` = the agent's own figure from the
  latest recorded response after the stage's last compaction (its `rule` says which fields
  the agent adds), falling back to the counter when there is none. Reports carry the source
  and its unit (`token_unit`, `token_model.unit_of`) as the part-1 agents' stages do.
- Eras (SPEC-agents §2.5.0.11): each stage module declares `ERAS`, a tuple of `Era` (first
  version, parameter values, source). `era_values` picks the row for the session's recorded
  version (or the `<agent>_version` parameter) and applies its values to the parameters left
  at their table default; an explicit value always wins. `eras.py` reads the same tuples
  (`ERA_TABLES` in `registry.py` lists them) as rows of its era table, so a replay of a
  session under the agent's profile resolves the era in `RunConfig.for_session` (defaults ←
  era ← profile ← explicit); `era_values` then reads the values as resolved.
- Recorded summaries: an importer marks the agent's own recorded summary message with
  `meta.compaction = {"source": <agent>, "kind": "summary", ...}` (SPEC-agents §2.5.0.5); the
  sources read here are `gemini-cli`, `roo-code`, `cline`, `opencode` and `openhands-v1`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..agents_common import (
    COMPACTION_EVENTS,
    assistant_positions,
    compaction_event,
    marker_positions,
)
from ..eras import VERSION_PARAMS, parse_version
from ..messages import Message
from ..params import PARAMS
from ..token_model import after_fields, compared, shown_after, unit_of
from ..tokens import extras_tokens, tokens_by_identity

if TYPE_CHECKING:
    from . import StageResult

TOKEN_SOURCES = ("anchored", "counter", "usage")


def recorded_usage(m: Message) -> Mapping[str, Any] | None:
    """The provider's recorded usage of the call this assistant message answered (SPEC §11
    `meta.recorded`), or None."""
    if m.role != "assistant":
        return None
    rec = m.meta.get("recorded")
    if isinstance(rec, Mapping) and isinstance(rec.get("total_input"), int):
        return rec
    return None


def usage_figure(rec: Mapping[str, Any], rule: str) -> int:
    """An agent's figure from one recorded usage: `input` = the prompt (cache included);
    `input_output` = prompt + output (Cline, Roo Code, OpenCode add the previous output)."""
    total = int(rec["total_input"])
    if rule == "input_output":
        out = rec.get("output")
        total += out if isinstance(out, int) and not isinstance(out, bool) else 0
    return total


class Costs:
    """Message costs under the profile's counter, by identity, kept in the stage memo."""

    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.memo: dict[int, tuple[Message, int]] = (
            ctx.memo.setdefault("costs", {}) if ctx.memo is not None else {})
        self.extras = extras_tokens(ctx.counter, "", ctx.tools, ctx.response_schema)

    def cost(self, m: Message) -> int:
        return tokens_by_identity(self.memo, m, self.ctx.counter)

    def of(self, messages: tuple[Message, ...]) -> int:
        """The cost of a state's tuple of messages, once per tuple object (states, and so
        their tuples, are kept by the fold from call to call)."""
        memo: dict[int, tuple[Any, int]] = (self.ctx.memo.setdefault("tuple_costs", {})
                                             if self.ctx.memo is not None else {})
        hit = memo.get(id(messages))
        if hit is not None and hit[0] is messages:
            return hit[1]
        value = sum(self.cost(m) for m in messages)
        if len(memo) > 64:
            memo.clear()
        memo[id(messages)] = (messages, value)
        return value

    def prompt(self, view: Sequence[Message]) -> int:
        """SPEC §5 full prompt of `view` with the session's tools and response schema."""
        return sum(self.cost(m) for m in view) + self.extras


def compared_tokens(costs: Costs, source: str, view: Sequence[Message], start: int,
                    rule: str = "input", counted: int | None = None,
                    call: int | None = None) -> tuple[int, str]:
    """(tokens, the source used) an agent's limit compares for `view`.

    `start`: the view index from which recorded usage still describes what is sent (after
    the stage's last compaction); `counted`: the counter's figure for `view` when the caller
    has it from prefix sums; `call`: the call the view is sent at (`token_model.step_call`
    of the fold's step; default the call being made), which the anchored source reads the
    bill of. The one switch of token sources (SPEC-agents §2.5.0.10)."""
    if source == "usage":
        for k in range(len(view) - 1, max(start, 0) - 1, -1):
            rec = recorded_usage(view[k])
            if rec is not None:
                return usage_figure(rec, rule), "usage"
    tokens = costs.prompt(view) if counted is None else counted
    if source == "anchored":
        return compared(costs.ctx, tokens, len(view), call, view=view), "anchored"
    return tokens, "counter"


def token_fields(ctx: Any, used: str, after: tuple[int, int] | None = None) -> dict[str, Any]:
    """A report's `token_source` and `token_unit` for the source a stage compared; with
    `after` (the counted `tokens_after` and the view's length), the view it left in that
    unit (`token_model.after_fields`)."""
    unit = unit_of(ctx, used)
    fields: dict[str, Any] = {"token_source": used, "token_unit": unit}
    if after is not None:
        fields.update(after_fields(ctx, unit, *after))
    return fields


class Sums:
    """Prefix sums of a per-position figure `figure(h, i)` (it may read the messages before
    i) over a stage's input, kept in the stage memo under
    `slot` and extended from the first position that changed since the previous call, so a
    call costs what was appended (without a memo: computed afresh, same values)."""

    def __init__(self, h: Sequence[Message], ctx: Any, slot: str,
                 figure: Callable[[Sequence[Message], int], int]):
        from . import changed_since  # here: the stages package imports this module

        memo = ctx.memo
        saved = memo.get(slot) if memo is not None else None
        if saved is None:
            sums, start = [0], 0
        else:
            seen, sums = saved
            changed = changed_since(seen, h, ctx, len(seen))
            start = changed[0] if changed else min(len(seen), len(h))
            del sums[start + 1:]
        for i in range(start, len(h)):
            sums.append(sums[-1] + figure(h, i))
        if memo is not None:
            memo[slot] = (h, sums)
        self.sums = sums
        self.start = start  # the first position computed at this call

    def between(self, a: int, b: int) -> int:
        return self.sums[b] - self.sums[a]


def cut_out(h: Sequence[Message], start: int, n: int, drop: Sequence[int]) -> list[Message]:
    """h[start:n] without the positions of `drop` (ascending), by slices."""
    out: list[Message] = []
    at = start
    for i in drop:
        if start <= i < n and i >= at:
            out.extend(h[at:i])
            at = i + 1
    out.extend(h[at:n])
    return out


# --- eras ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Era:
    """Versions from `since` (inclusive) up to the next era's: the parameter values in force
    and the public fact they rest on."""

    since: str
    label: str
    values: Mapping[str, Any]
    source: str


SESSION_VERSION_KEYS = ("agent_version", "version", "cli_version")


def session_version(ctx: Any, param: str) -> str | None:
    """The version a stage reads: its `<agent>_version` parameter, else the session's
    recorded one (`meta.agent_version`, `version` or `cli_version`)."""
    given = ctx.params.get(param)
    if isinstance(given, str) and given.strip():
        return given.strip()
    session = ctx.session if isinstance(ctx.session, Mapping) else {}
    for key in SESSION_VERSION_KEYS:
        value = session.get(key)
        if isinstance(value, str) and parse_version(value) is not None:
            return value
    return None


def era_of(eras: Sequence[Era], version: str | None) -> Era:
    """The era of `version` (eras in ascending order); unknown or unparsable → the newest."""
    parsed = parse_version(version)
    if parsed is None:
        return eras[-1]
    chosen = eras[0]
    for era in eras:
        since = parse_version(era.since) or ()
        if parsed >= since:
            chosen = era
    return chosen


def era_values(ctx: Any, eras: Sequence[Era], version_param: str) -> tuple[dict[str, Any], Era]:
    """Every parameter of the era tables with its value in force: the era's where the replay
    left the parameter at its table default, else the replay's own."""
    version = session_version(ctx, version_param)
    era = era_of(eras, version)
    names = {n for e in eras for n in e.values}
    agent, resolved = ctx.params.get("_era") or (None, None)
    if VERSION_PARAMS.get(agent or "") == version_param and resolved == version:
        # `RunConfig.for_session` resolved this release's era already (eras.py), with its
        # precedence: the values are read as they stand.
        return {n: ctx.params.get(n, PARAMS[n].default) for n in names}, era
    out: dict[str, Any] = {}
    for name in names:
        value = ctx.params.get(name, PARAMS[name].default)
        if value == PARAMS[name].default and name in era.values:
            value = era.values[name]
        out[name] = value
    return out, era


class AgentRun:
    """What a part-2 agent stage's run reads once per call before its fold (Gemini CLI,
    OpenCode, Roo Code, Cline, Aider): the input, the session's figures, the leading system
    block, message costs and their prefix sums, the assistant positions, and — for an agent
    with a token source (`agent`) — the source its limit compares and whether it replays the
    recorded compactions; for an agent whose summaries are recorded (`source`), where they
    are."""

    def __init__(self, h: Sequence[Message], ctx: Any, agent: str | None = None,
                 source: str | None = None):
        p = ctx.params
        self.h, self.ctx = h, ctx
        self.session: Mapping[str, Any] = ctx.session if isinstance(ctx.session, Mapping) \
            else {}
        self.placeholder = p.get("summary_placeholder_tokens", 2000)
        self.lead = lead_len(h)
        self.costs = Costs(ctx)
        self.positions = assistant_positions(h, ctx)
        self.sums = Sums(h, ctx, "sums", lambda h, i: self.costs.cost(h[i])).sums
        if agent is not None:
            self.source = p.get(f"{agent}_token_source", "anchored")
            self.recorded_mode = p.get(f"{agent}_mode", "predict") == "recorded"
        self.summaries = recorded_summaries(h, ctx, source) if source is not None else []

    def counted(self, n: int, start: int, head_tokens: int, drops: Sequence[int] = ()) -> int:
        """The counter's full prompt of the leading block, a head costing `head_tokens` and
        `h[start:n]` without `drops`, from the prefix sums (no scan)."""
        return (self.costs.extras + self.sums[self.lead] + head_tokens
                + self.sums[n] - self.sums[start]
                - sum(self.costs.cost(self.h[i]) for i in drops))


def measures_billed_by(agent: str) -> Callable[[Mapping[str, Any]], bool]:
    """A stage's `measures_billed`: whether its limit compares the agent's recorded usage."""
    def measures_billed(values: Mapping[str, Any]) -> bool:
        return values.get(f"{agent}_token_source", "anchored") == "usage"
    return measures_billed


# --- recorded summaries ----------------------------------------------------------------------


def recorded_summaries(h: Sequence[Message], ctx: Any, source: str) -> list[int]:
    """Indices of the messages marked as this agent's recorded summary, in order."""
    out = []
    for i in marker_positions(h, ctx, "compaction"):
        marker = h[i].meta.get("compaction")
        if isinstance(marker, Mapping) and marker.get("source") == source and \
                marker.get("kind") == "summary":
            out.append(i)
    return out


def step_markers(indices: Sequence[int], positions: Sequence[int], j: int, n: int) -> list[int]:
    """The recorded markers step j (prefix `input[:n]`) applies: those after call j − 1's
    response, that response included (a summary recorded as an assistant answer, as Roo Code
    ≤ 3.29 and OpenCode write it, takes effect at the next call)."""
    lo = positions[j - 1] if 0 < j <= len(positions) else -1
    return [i for i in indices if lo <= i < n]


def late_call(h: Sequence[Message], applied: Sequence[int], j: int) -> int | None:
    """The call a recorded compaction is filed under when its summary is an assistant answer:
    the call that answered with it (SPEC-agents §2.5.0.4 r(i)), one before the step."""
    return j - 1 if any(h[i].role == "assistant" for i in applied) and j > 0 else None


def event_kind(recorded: bool, applied_recorded: bool, predicted: bool) -> str | None:
    """The trace's kind of a compaction at one call (SPEC-agents §2.5.0.7)."""
    if applied_recorded:
        return "predicted_and_recorded" if predicted else "recorded"
    if recorded:
        return "recorded_not_predicted" if not predicted else "predicted_and_recorded"
    return "predicted" if predicted else None


def add_fold_event(report: dict[str, Any], stage: str, info: Mapping[str, Any],
                   after: int | None) -> None:
    """Put the fold's event of this call (`info["kind"]`, none when None) in `report`'s
    `COMPACTION_EVENTS`, filed under the call `info["late"]` when the fold gave one."""
    if info["kind"] is not None:
        report[COMPACTION_EVENTS] = [compaction_event(
            stage, info["kind"], info["trigger"], info["summary_source"], info["tokens_before"],
            after, info.get("late"))]


def add_late_events(report: dict[str, Any], stage: str, result: Any, after: int | None,
                    late_summary: str | None, summary: str | None) -> None:
    """`COMPACTION_EVENTS` of a fold whose past steps read their response: the previous
    call's recorded compaction, learnt only now from that response (`previous_info["late"]`,
    filed under that call, summary source `late_summary`), then this call's (`summary`)."""
    events = []
    prev = result.previous_info
    if prev and prev.get("late"):
        events.append(compaction_event(stage, prev["late"], "recorded", late_summary,
                                       prev["tokens_before"], None, result.call - 1))
    info = result.info
    if info["kind"] is not None:
        events.append(compaction_event(
            stage, info["kind"], info["trigger"], summary, info["tokens_before"], after))
    if events:
        report[COMPACTION_EVENTS] = events


def compaction_activity(report: Mapping[str, Any]) -> int:
    """A compaction stage's `activity`: 1 at a call where it compacted, else 0."""
    return 1 if report.get("compacted") else 0


def lead_len(h: Sequence[Message]) -> int:
    n = 0
    while n < len(h) and h[n].role == "system":
        n += 1
    return n


def text(m: Message) -> str:
    return m.content.decode("utf-8", "replace")


def replace_last(history: Sequence[Message], after: str, report: dict[str, Any]) -> StageResult:
    """A tool-output stage's result when the entering (last) message's text becomes `after`:
    the history with that message replaced, its position the one changed."""
    from . import StageResult  # here: the stages package imports this module

    new = history[-1].with_content(after.encode("utf-8", "surrogatepass"))
    return StageResult((*history[:-1], new), report, (len(history) - 1,))


def truncation_activity(report: Mapping[str, Any]) -> int:
    """A tool-output stage's `activity`: 1 at a call whose output it cut, else 0."""
    return 1 if report.get("truncated") else 0


def describe_compaction(report: Mapping[str, Any], what: str, limit_name: str) -> str:
    """One sentence for a compaction stage's report."""
    source = report.get("token_source", "counter")
    if report.get("compacted"):
        return (f"{what} ({report.get('trigger')}, {report.get('summary_source')} summary): "
                f"{report.get('tokens_before')} → {shown_after(report)} tokens "
                f"({source}).")
    limit = report.get("limit")
    if limit is None:
        return f"{report.get('tokens_before')} tokens ({source}); {limit_name} off."
    recorded = " (a recorded compaction here was not reached)" if report.get("recorded") else ""
    return (f"{report.get('tokens_before')} tokens ({source}), below the {limit_name} "
            f"{limit}{recorded}.")


def quiet_peak(facts: Any) -> tuple[int, Any] | None:
    """For a compaction stage's quiet note: (the peak `tokens_before`, the last call's
    `limit`) when it never compacted; None when it did or no call reported a limit."""
    if any(r.get("compacted") for r in facts.reports):
        return None
    limits = [r.get("limit") for r in facts.reports if r]
    if not limits:
        return None
    return max((r.get("tokens_before") or 0 for r in facts.reports), default=0), limits[-1]


def quiet_compaction(facts: Any, agent: str, limit_name: str) -> str | None:
    quiet = quiet_peak(facts)
    if quiet is None:
        return None
    peak, limit = quiet
    if limit is None:
        return f"{agent} never compacted: its {limit_name} is off."
    return (f"{agent} never compacted: the prompt peaked at {peak:,} tokens, below the "
            f"{limit_name} of {limit:,}.")
