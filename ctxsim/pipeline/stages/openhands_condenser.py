"""OpenHands' condensers, then its message assembly (SPEC-agents §2.5.6), outgoing, as a fold.

OpenHands (V0, `openhands/memory/condenser`) keeps an append-only event stream and, before each
LLM call, condenses the view of it; rolling condensers record which events they forgot, so the
forgetting persists. ctxsim maps messages to events (one per message, one action per call),
folds over the calls, then converts the condensed view into messages as OpenHands'
`ConversationMemory` does (`v0`) or keeps the messages in order (`plain`). The LLM kinds cannot
call a model: their summary is a placeholder (§2.5.0.6) unless the transcript recorded one.
The assembly is `_openhands_assembly.Assembly`, mixed into this stage's run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents_common import (
    COMPACTION_EVENTS,
    compaction_event,
    fold,
    placeholder_text,
)
from ..messages import Message
from ..params_agents import ROLLING_CONDENSERS
from ..token_model import compared, step_call
from ..tokens import extras_tokens
from . import StageContext, StageResult, changed_since, view_result
from ._codex import call_of
from ._openhands_assembly import MASKED, Assembly, Event, first_difference

NAME = "openhands_condenser"


@dataclass(frozen=True)
class State:
    forgotten: frozenset[int] = frozenset()
    summary: tuple[str, int, str] | None = None  # (text, offset, source)


class _Run(Assembly):
    def __init__(self, history: tuple[Message, ...], ctx: StageContext):
        p = ctx.params
        self.h = history
        self.ctx = ctx
        self.config = p.get("openhands_condenser_config") or {"type": "noop"}
        self.max_chars = p.get("openhands_max_message_chars", 30000)
        self.plain = p.get("openhands_assembly", "v0") == "plain"
        self.over = p.get("openhands_request_over_tokens")
        self.recorded_mode = p.get("openhands_mode", "predict") == "recorded"
        self.placeholder_tokens = p.get("summary_placeholder_tokens", 2000)
        self.extras = extras_tokens(ctx.counter, "", ctx.tools, ctx.response_schema)
        memo = ctx.memo if ctx.memo is not None else {}
        # Caches by identity or by value; each holds what the previous call computed, so a
        # call costs what was appended (a fresh dict without a memo: same results).
        self.costs: dict[int, tuple[Message, int]] = memo.setdefault("costs", {})
        self.shaped: dict[tuple[int, bool], tuple[Message, Message]] = memo.setdefault(
            "shaped", {})
        self.masks: dict[int, Event] = memo.setdefault("masks", {})
        self.memo = memo
        ev = _Events.of(history, ctx)
        if memo.get("events_for_walk") is not ev:
            # Events were rebuilt (an earlier message changed): cached walks are stale.
            for key in ("walks", "view", "masked", "event_messages"):
                memo.pop(key, None)
            memo["events_for_walk"] = ev
        self.events, self.ends, self.positions = ev.events, ev.ends, ev.positions
        self.requests, self.recorded, self._ids = ev.requests, ev.recorded, ev.ids
        self.warnings: list[str] = []
        self.masked_now = 0  # observations the masking condenser replaced at this step

    # --- the view ------------------------------------------------------------------------

    def view(self, n: int, s: State) -> list[Event]:
        """The events of input[:n] not forgotten, the summary at its offset (View.from_events).

        The filtered list for a state is kept and extended while the state lasts."""
        end = self.ends[n]
        if not s.forgotten:
            events = self.events[:end]
        else:
            cached = self.memo.get("view")
            if cached is not None and cached[0] == s.forgotten and cached[1] <= end:
                _, done, kept = cached
                kept = kept + [e for e in self.events[done:end] if e.id not in s.forgotten]
            else:
                kept = [e for e in self.events[:end] if e.id not in s.forgotten]
            self.memo["view"] = (s.forgotten, end, kept)
            events = list(kept)
        if s.summary is not None:
            text, offset, source = s.summary
            events.insert(offset, Event(None, "summary", text=text, source=source))
        return events

    def _mine(self, indices: Sequence[int], n: int, j: int) -> list[int]:
        # r(i) = j includes a marker on the response itself (index n).
        return [i for i in indices if call_of(i, self.positions) == j]

    # --- condensers ----------------------------------------------------------------------

    def condense(self, cfg: Mapping[str, Any], view: list[Event], request: bool, n: int,
                 j: int, s: State, recorded_summary: str | None
                 ) -> tuple[list[Event], State | None, str | None]:
        """One condenser on the running view: (new view, new state when it condensed — a
        rolling condensation —, summary source)."""
        kind = cfg["type"]
        if kind == "observation_masking":
            cut = max(0, len(view) - cfg["attention_window"])
            return self._masked(view, cut) + view[cut:], None, None
        if kind == "recent":
            head = view[:cfg["keep_first"]]
            tail_length = max(0, cfg["max_events"] - len(head))
            return head + view[-tail_length:], None, None
        if kind == "browser_output_masking":
            self.warnings.append("browser_output_masking acts as noop: ctxsim's tool results "
                                 "do not carry the visited URL")
            return view, None, None
        if kind not in ROLLING_CONDENSERS or self.recorded_mode:
            return view, None, None
        if kind == "conversation_window":
            if not request:
                return view, None, None
            return self._conversation_window(view, s)
        if not (len(view) > cfg["max_size"] or request):
            return view, None, None
        if kind == "amortized":
            head = view[:cfg["keep_first"]]
            target = cfg["max_size"] // 2
            tail = view[-(target - len(head)):]
            keep = {id(e) for e in head + tail}
            return self._forget(view, s, [e for e in view if id(e) not in keep])
        if kind == "llm_attention":
            head_ids = {e.id for e in view[:cfg["keep_first"]] if e.id is not None}
            wanted = cfg["max_size"] // 2 - len(head_ids)
            chosen: set[int] = set()
            for e in reversed(view):
                if len(chosen) >= wanted:
                    break
                if e.id is not None and e.id not in chosen:  # head ids count too (source)
                    chosen.add(e.id)
            return self._forget(view, s, [e for e in view if e.id is not None
                                          and e.id not in chosen and e.id not in head_ids])
        # llm, structured: forget a range, summarize it at offset keep_first.
        keep_first = cfg["keep_first"]
        from_tail = cfg["max_size"] // 2 - len(view[:keep_first]) - 1
        if from_tail <= 0:
            return view, None, None
        middle = [e for e in view[keep_first:-from_tail] if e.kind != "summary"]
        if not middle:
            return view, None, None
        ids = [e.id for e in middle if e.id is not None]
        forgotten = s.forgotten | set(range(min(ids), max(ids) + 1))
        if recorded_summary is not None:
            text, source = recorded_summary, "recorded"
        else:
            tokens = self.assembled_tokens(view, n)
            text = placeholder_text(NAME, len(middle), tokens, j, self.placeholder_tokens,
                                    self.ctx.counter)
            source = "placeholder"
        state = State(frozenset(forgotten), (text, keep_first, source))
        # The running view (earlier pipeline members applied) without what was forgotten,
        # the new summary at its offset, as `View.from_events` would rebuild it.
        running = [e for e in view if e.kind != "summary" and e.id not in forgotten]
        running.insert(keep_first, Event(None, "summary", text=text, source=source))
        return running, state, source

    def _mask(self, e: Event) -> Event:
        if e.kind != "observation":
            return e
        masked = self.masks.get(e.id)  # type: ignore[arg-type]
        if masked is None or masked.message != e.message:
            masked = self.masks[e.id] = Event(e.id, "masked", e.message,  # type: ignore[index]
                                              text=MASKED)
        return masked

    def _masked(self, view: list[Event], cut: int) -> list[Event]:
        """view[:cut] with its observations masked, extended from the previous call's."""
        cached = self.memo.get("masked")
        if cached is not None and cached[1] <= cut and \
                first_difference(cached[0], view, cached[1]) == cached[1]:
            _, done, out, count = cached
            more = view[done:cut]
        else:
            done, out, count, more = 0, [], 0, view[:cut]
        out = out + [self._mask(e) for e in more]
        count += sum(1 for e in more if e.kind == "observation")
        self.memo["masked"] = (view[:cut], cut, out, count)
        self.masked_now += count
        return list(out)

    def _conversation_window(self, view: list[Event], s: State
                             ) -> tuple[list[Event], State | None, str | None]:
        system = next((e for e in view if e.kind == "system"), None)
        user = next((e for e in view if e.kind == "user_message"), None)
        if user is None:  # nothing can be forgotten, yet the request is handled
            return view, s, None
        essential = [e for e in (system, user) if e is not None]
        keep = max(1, (len(view) - len(essential)) // 2)
        window = view[len(view) - keep:]
        while window and window[0].kind in ("observation", "masked", "summary"):
            window = window[1:]
        kept = {id(e) for e in essential + window}
        return self._forget(view, s, [e for e in view if id(e) not in kept])

    def _forget(self, view: list[Event], s: State, drop: list[Event]
                ) -> tuple[list[Event], State, None]:
        ids = {e.id for e in drop if e.id is not None}
        state = State(s.forgotten | ids, s.summary)
        return [e for e in view if e.id is None or e.id not in ids], state, None

    # --- one call ------------------------------------------------------------------------

    def step(self, s: State, history: Sequence[Message], n: int, j: int
             ) -> tuple[State, tuple[Message, ...], Any]:
        """Call j on the prefix history[:n]; only the current call (j = m) is reported."""
        current = j == len(self.positions)
        view = self.view(n, s)
        before = s
        request = bool(self._mine(self.requests, n, j))
        if not request and self.over is not None:
            # The stand-in for the LLM's context-window error compares the provider's tokens
            # where the session has a bill (SPEC-agents §2.5.0.10).
            messages, assembled = self.assemble(view, n)
            request = compared(self.ctx, assembled["tokens"] + self.extras, len(messages),
                               step_call(self.ctx, history, n, j), view=messages) > self.over
        recorded_at = self._mine([i for i, _ in self.recorded], n, j)
        recorded_now = [r for i, r in self.recorded if i in recorded_at]
        recorded_summary = next((r["summary"] for r in recorded_now
                                 if isinstance(r.get("summary"), str)), None)
        source = None
        condensed = False
        running = view
        if self.recorded_mode and recorded_now:
            s, source = self._apply_recorded(s, recorded_now)
            condensed = True
            running = self.view(n, s)
        members = (self.config.get("condensers", []) if self.config["type"] == "pipeline"
                   else [self.config])
        self.masked_now = 0
        for cfg in members:
            # In recorded mode the rolling kinds return no new state: only masking runs.
            running, new, now = self.condense(cfg, running, request, n, j, s, recorded_summary)
            if new is not None:
                s, condensed, source = new, True, now
                break
        if not current:
            late = None
            if n in recorded_at:
                late_kind = ("recorded" if self.recorded_mode else
                             "predicted_and_recorded" if condensed else "recorded_not_predicted")
                late = {"call_index": j, **compaction_event(
                    NAME, late_kind, self.config["type"], source, None, None)}
            return s, (), late
        out, info = self.assemble(running, n)
        masked = (sum(1 for e in running if e.kind == "masked")
                  if self.config["type"] == "pipeline" else self.masked_now)
        report: dict[str, Any] = {
            "kind": self.config["type"],
            "events_before": len(view),
            "events_after": len(running),
            "condensed": condensed,
            "request": request,
            "forgotten_total": len(s.forgotten),
            "forgotten_now": len(s.forgotten - before.forgotten),
            "masked": masked,
            "dropped_groups": info["dropped_groups"],
            "inserted_initial_user": info["inserted_initial_user"],
            "summary_source": source,
        }
        kind = None
        if condensed:
            kind = ("recorded" if self.recorded_mode else
                    "predicted_and_recorded" if recorded_now else "predicted")
        elif recorded_now:
            kind = "recorded_not_predicted"
        if kind is not None:
            report[COMPACTION_EVENTS] = [compaction_event(
                NAME, kind, self.config["type"], source,
                self.assembled_tokens(view, n), self.prompt(out))]
        if self.warnings:
            report["warnings"] = sorted(set(self.warnings))
        return s, tuple(out), report

    def _apply_recorded(self, s: State, recorded: list[Mapping[str, Any]]
                        ) -> tuple[State, str | None]:
        """Replay recorded `CondensationAction`s: their forgotten OpenHands ids (mapped to
        ctxsim's events) join F; a recorded summary replaces the current one."""
        forgotten = set(s.forgotten)
        summary = s.summary
        source = None
        for r in recorded:
            ids = r.get("forgotten_event_ids")
            if not isinstance(ids, list):
                start, end = r.get("forgotten_events_start_id"), r.get("forgotten_events_end_id")
                ids = list(range(start, end + 1)) if isinstance(start, int) and isinstance(
                    end, int) else []
            forgotten.update(self._ids[x] for x in ids if x in self._ids)
            if isinstance(r.get("summary"), str):
                offset = r.get("summary_offset")
                summary = (r["summary"], offset if isinstance(offset, int) else 0, "recorded")
                source = "recorded"
        return State(frozenset(forgotten), summary), source


@dataclass
class _Events:
    """The events of the input and what points at them, kept in the memo and extended with
    what was appended since the previous call (rebuilt when an earlier message changed)."""

    seen: tuple[Message, ...] = ()
    events: list[Event] = field(default_factory=list)
    ends: list[int] = field(default_factory=lambda: [0])
    positions: list[int] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)
    recorded: list[tuple[int, Mapping[str, Any]]] = field(default_factory=list)
    ids: dict[Any, int] = field(default_factory=dict)  # OpenHands event id → ctxsim's

    @classmethod
    def of(cls, history: tuple[Message, ...], ctx: StageContext) -> _Events:
        memo = ctx.memo
        ev = memo.get("events") if memo is not None else None
        if ev is None or changed_since(ev.seen, history, ctx, len(ev.seen)) or \
                len(history) < len(ev.seen):
            ev = cls()
        for i in range(len(ev.seen), len(history)):
            ev.add(i, history[i])
        ev.seen = history
        if memo is not None:
            memo["events"] = ev
        return ev

    def add(self, i: int, m: Message) -> None:
        events = self.events
        if m.role == "assistant" and m.tool_calls:
            self.positions.append(i)
            ids = m.meta.get("call_event_ids")
            for k in range(len(m.tool_calls)):
                if isinstance(ids, Sequence) and k < len(ids):
                    self.ids[ids[k]] = len(events)
                events.append(Event(len(events), "action", i, k))
        else:
            kind = {"system": "system", "user": "user_message", "tool": "observation"}.get(
                m.role, "agent_message")
            if m.role == "assistant":
                self.positions.append(i)
            if m.meta.get("event_id") is not None:
                self.ids[m.meta["event_id"]] = len(events)
            events.append(Event(len(events), kind, i))
        self.ends.append(len(events))
        if m.meta.get("openhands_condensation_request"):
            self.requests.append(i)
        if isinstance(m.meta.get("openhands_condensation"), Mapping):
            self.recorded.append((i, m.meta["openhands_condensation"]))


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Condense the event view of the history, then assemble OpenHands' messages.

    Invariant: pure — forgetting persists only through the fold over the input's prefixes;
    every result sent has its call and every call its result (v0 and plain alike).
    """
    h = tuple(history)
    work = _Run(h, ctx)
    # Past steps read the response (a recorded condensation marks the next message, often
    # the response), so the current step's state is not reused at the next call.
    result = fold(h, ctx, State(), work.step, reuse_current=False)
    out, report = result.view, result.report()
    return view_result(h, out, report)


# --- what the report means (registry.StageDef) ---------------------------------------------

def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("condensed") or report.get("masked") else 0


def describe(report: Mapping[str, Any]) -> str:
    kind = report.get("kind")
    parts = [f"{kind}: {report.get('events_before')} events → {report.get('events_after')}"]
    if report.get("condensed"):
        parts.append(f"condensed, {report.get('forgotten_now')} forgotten now"
                     + (f", {report.get('summary_source')} summary"
                        if report.get("summary_source") else ""))
    if report.get("forgotten_total"):
        parts.append(f"{report.get('forgotten_total')} forgotten in all")
    if report.get("masked"):
        parts.append(f"{report.get('masked')} observations masked")
    if report.get("request"):
        parts.append("condensation requested")
    if report.get("dropped_groups"):
        parts.append(f"{report.get('dropped_groups')} tool groups left out (a result "
                     "forgotten or masked)")
    if report.get("inserted_initial_user"):
        parts.append("first user message re-inserted")
    return "; ".join(parts) + "."


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    config = facts.value("openhands_condenser_config") or {}
    kind = config.get("type")
    if kind == "noop":
        return "The OpenHands condenser is noop: the whole event history is sent."
    if kind == "conversation_window":
        over = facts.value("openhands_request_over_tokens")
        return ("OpenHands' conversation_window condenser never ran: it acts only on a "
                "condensation request, and no call " + (
                    f"went over {over:,} tokens." if over else "recorded one."))
    if "max_size" in config:
        return (f"OpenHands' {kind} condenser never fired: the view never exceeded "
                f"max_size = {config['max_size']} events.")
    if kind == "observation_masking":
        return (f"OpenHands' observation masking never masked: no observation was older than "
                f"the last {config.get('attention_window')} events.")
    if kind == "recent":
        return (f"OpenHands' recent-events condenser kept everything: the view never held more "
                f"than max_events = {config.get('max_events')} events.")
    if kind == "browser_output_masking":
        return ("browser_output_masking acts as noop in ctxsim: its tool results do not carry "
                "the visited URL.")
    return (f"OpenHands' {kind} condenser never condensed or masked anything in this "
            "replay.")
