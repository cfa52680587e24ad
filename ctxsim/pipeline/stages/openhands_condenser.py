"""OpenHands' condensers, then its message assembly (SPEC-agents §2.5.6), outgoing, as a fold.

OpenHands (V0, `openhands/memory/condenser`) keeps an append-only event stream and, before each
LLM call, condenses the view of it; rolling condensers record which events they forgot, so the
forgetting persists. ctxsim maps messages to events (one per message, one action per call),
folds over the calls, then converts the condensed view into messages as OpenHands'
`ConversationMemory` does (`v0`) or keeps the messages in order (`plain`). The LLM kinds cannot
call a model: their summary is a placeholder (§2.5.0.6) unless the transcript recorded one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..agents_common import (
    COMPACTION_EVENTS,
    PLACEHOLDER_KIND,
    compaction_event,
    fold,
    placeholder_message,
    placeholder_text,
)
from ..messages import Message, decode_for_display
from ..params import ROLLING_CONDENSERS
from ..tokens import extras_tokens, message_tokens
from . import StageContext, StageResult
from ._codex import call_of

NAME = "openhands_condenser"
MASKED = "<MASKED>"
TRUNCATED = "\n[... Observation truncated due to length ...]\n"
PLAIN_KINDS = ("system", "user_message", "agent_message")


@dataclass(frozen=True)
class Event:
    """One OpenHands event: `id` (None for a summary), its kind, the message it comes from
    (index in the input) and, for an action, which call of that message."""

    id: int | None
    kind: str  # system | user_message | agent_message | action | observation | masked | summary
    message: int = -1
    call: int = 0
    text: str = ""
    source: str = ""  # of a summary: placeholder | recorded


@dataclass(frozen=True)
class State:
    forgotten: frozenset[int] = frozenset()
    summary: tuple[str, int, str] | None = None  # (text, offset, source)


def build_events(history: Sequence[Message]) -> tuple[list[Event], list[int]]:
    """Events in message order (ids 0, 1, …) and, per message index, the number of events
    of the messages before it (so the events of `history[:n]` are `events[:ends[n]]`)."""
    events: list[Event] = []
    ends = [0]
    for i, m in enumerate(history):
        if m.role == "system":
            events.append(Event(len(events), "system", i))
        elif m.role == "user":
            events.append(Event(len(events), "user_message", i))
        elif m.role == "tool":
            events.append(Event(len(events), "observation", i))
        elif m.tool_calls:
            for k in range(len(m.tool_calls)):
                events.append(Event(len(events), "action", i, k))
        else:
            events.append(Event(len(events), "agent_message", i))
        ends.append(len(events))
    return events, ends


def truncate_content(text: str, limit: int) -> str:
    """OpenHands `truncate_content`: the middle of an over-long text (code points) is cut."""
    if limit < 0 or len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + TRUNCATED + text[-half:]


class _Run:
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
        self.events, self.ends = build_events(history)
        self.positions = [i for i, m in enumerate(history) if m.role == "assistant"]
        self.extras = extras_tokens(ctx.counter, "", ctx.tools, ctx.response_schema)
        self.costs: dict[int, tuple[Message, int]] = (
            ctx.memo.setdefault("costs", {}) if ctx.memo is not None else {})
        self._ids = self._openhands_ids()
        self.requests = [i for i, m in enumerate(history)
                         if m.meta.get("openhands_condensation_request")]
        self.recorded = [(i, m.meta["openhands_condensation"]) for i, m in enumerate(history)
                         if isinstance(m.meta.get("openhands_condensation"), Mapping)]
        self.warnings: list[str] = []

    def _openhands_ids(self) -> dict[Any, int]:
        """OpenHands event id (as recorded by the importer) → ctxsim event id."""
        out: dict[Any, int] = {}
        for ev in self.events:
            m = self.h[ev.message]
            if ev.kind == "action":
                ids = m.meta.get("call_event_ids")
                if isinstance(ids, Sequence) and ev.call < len(ids):
                    out[ids[ev.call]] = ev.id
            elif m.meta.get("event_id") is not None:
                out[m.meta["event_id"]] = ev.id
        return out

    def cost(self, m: Message) -> int:
        hit = self.costs.get(id(m))
        if hit is None or hit[0] is not m:
            hit = (m, message_tokens(m, self.ctx.counter))
            self.costs[id(m)] = hit
        return hit[1]

    def prompt(self, messages: Sequence[Message]) -> int:
        return sum(self.cost(m) for m in messages) + self.extras

    # --- the view ------------------------------------------------------------------------

    def view(self, n: int, s: State) -> list[Event]:
        events = [e for e in self.events[:self.ends[n]] if e.id not in s.forgotten]
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
            cut = len(view) - cfg["attention_window"]
            return [Event(e.id, "masked", e.message, text=MASKED)
                    if e.kind == "observation" and k < cut else e
                    for k, e in enumerate(view)], None, None
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
                if e.id is not None and e.id not in chosen and e.id not in head_ids:
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
            tokens = self.prompt(self.assemble(view, n)[0])
            text = placeholder_text(NAME, len(middle), tokens, j, self.placeholder_tokens,
                                    self.ctx.counter)
            source = "placeholder"
        state = State(frozenset(forgotten), (text, keep_first, source))
        # The running view (earlier pipeline members applied) without what was forgotten,
        # the new summary at its offset, as `View.from_events` would rebuild it.
        running = [e for e in view if e.kind != "summary" and e.id not in forgotten]
        running.insert(keep_first, Event(None, "summary", text=text, source=source))
        return running, state, source

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

    # --- assembly ------------------------------------------------------------------------

    def _event_message(self, e: Event) -> Message:
        if e.kind == "summary":
            return placeholder_message("user", e.text, PLACEHOLDER_KIND if e.source
                                       == "placeholder" else "condensation_summary")
        return placeholder_message("user", e.text, "masked_observation")

    def assemble(self, view: list[Event], n: int) -> tuple[list[Message], dict[str, Any]]:
        """The messages OpenHands sends for `view` (events of input[:n])."""
        if self.plain:
            out, info = self._plain(view)
        else:
            out, info = self._v0(view, n)
        out, dropped = _filter_unmatched(out)
        info["dropped_groups"] += dropped
        if not self.plain:
            out = _space_user_runs(out)
        return [self._truncate(m) for m in out], info

    def _v0(self, view: list[Event], n: int) -> tuple[list[Message], dict[str, Any]]:
        events = list(view)
        first_system = next((e for e in self.events[:self.ends[n]] if e.kind == "system"), None)
        first_user = next((e for e in self.events[:self.ends[n]]
                           if e.kind == "user_message"), None)
        if first_system is not None and not any(e.kind == "system" for e in events):
            events.insert(0, first_system)
        # OpenHands always has its system prompt at position 0 (it makes one when missing), so
        # the initial user message belongs at 1; without any system message ctxsim has no
        # text to put there and checks the first position instead [ctxsim's reading].
        slot = 1 if events and events[0].kind == "system" else 0
        inserted = False
        if first_user is not None and events and (
                len(events) == slot or events[slot].kind != "user_message"):
            events.insert(slot, first_user)
            inserted = True
        out: list[Message] = []
        pending: dict[int, None] = {}
        stored: dict[str, Message] = {}
        for e in events:
            if e.kind in PLAIN_KINDS:
                out.append(self.h[e.message])
            elif e.kind in ("masked", "summary"):
                out.append(self._event_message(e))
            elif e.kind == "action":
                pending.setdefault(e.message)
            else:
                m = self.h[e.message]
                stored[m.tool_call_id] = m
            for g in list(pending):
                calls = self.h[g].tool_calls
                if all(c.id in stored for c in calls):
                    out.append(self.h[g])
                    out.extend(stored.pop(c.id) for c in calls)
                    del pending[g]
        return out, {"dropped_groups": len(pending), "inserted_initial_user": inserted}

    def _plain(self, view: list[Event]) -> tuple[list[Message], dict[str, Any]]:
        first_seen: dict[int, int] = {}
        calls: dict[int, set[int]] = {}
        masked: set[int] = set()
        summary: tuple[int, Event] | None = None
        for pos, e in enumerate(view):
            if e.kind == "summary":
                summary = (pos, e)
                continue
            first_seen.setdefault(e.message, pos)
            if e.kind == "action":
                calls.setdefault(e.message, set()).add(e.call)
            elif e.kind == "masked":
                masked.add(e.message)
        out: list[Message] = []
        placed = summary is None
        for i in sorted(first_seen):
            if not placed and first_seen[i] > summary[0]:  # type: ignore[index]
                out.append(self._event_message(summary[1]))  # type: ignore[index]
                placed = True
            m = self.h[i]
            if m.role == "assistant" and m.tool_calls:
                kept = tuple(c for k, c in enumerate(m.tool_calls) if k in calls.get(i, ()))
                m = m if len(kept) == len(m.tool_calls) else replace(m, tool_calls=kept)
            elif i in masked:
                m = m.with_content(MASKED.encode())
            out.append(m)
        if not placed:
            out.append(self._event_message(summary[1]))  # type: ignore[index]
        return out, {"dropped_groups": 0, "inserted_initial_user": False}

    def _truncate(self, m: Message) -> Message:
        if self.max_chars < 0 or not (m.role == "tool" or m.meta.get("kind") in (
                "masked_observation", PLACEHOLDER_KIND, "condensation_summary")):
            return m
        if len(m.content) <= self.max_chars:  # never more code points than bytes
            return m
        text = decode_for_display(m.content)
        cut = truncate_content(text, self.max_chars)
        return m if cut == text else m.with_content(cut.encode("utf-8"))

    # --- one call ------------------------------------------------------------------------

    def step(self, s: State, history: tuple[Message, ...], n: int, j: int
             ) -> tuple[State, tuple[Message, ...], Any]:
        """Call j on the prefix history[:n]; only the current call (j = m) is reported."""
        current = j == len(self.positions)
        view = self.view(n, s)
        before = s
        request = bool(self._mine(self.requests, n, j))
        assembled: list[Message] | None = None
        if not request and self.over is not None:
            assembled = self.assemble(view, n)[0]
            request = self.prompt(assembled) > self.over
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
        for cfg in members:
            # In recorded mode the rolling kinds return no new state: only masking runs.
            running, new, now = self.condense(cfg, running, request, n, j, s, recorded_summary)
            if new is not None:
                s, condensed, source = new, True, now
                break
        if not current:
            late = None
            if n in recorded_at:
                kind = ("recorded" if self.recorded_mode else
                        "predicted_and_recorded" if condensed else "recorded_not_predicted")
                late = {"call_index": j, **compaction_event(
                    NAME, kind, self.config["type"], source, None, None)}
            return s, (), late
        out, info = self.assemble(running, n)
        masked = sum(1 for e in running if e.kind == "masked")
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
                self.prompt(self.assemble(view, n)[0]), self.prompt(out))]
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


def _filter_unmatched(messages: list[Message]) -> tuple[list[Message], int]:
    """OpenHands `_filter_unmatched_tool_calls`: results need a kept call and calls a kept
    result; an assistant message left without calls goes, even with text."""
    call_ids = {c.id for m in messages if m.role == "assistant" for c in m.tool_calls}
    result_ids = {m.tool_call_id for m in messages if m.role == "tool"}
    out: list[Message] = []
    dropped = 0
    for m in messages:
        if m.role == "tool":
            if m.tool_call_id in call_ids:
                out.append(m)
        elif m.role == "assistant" and m.tool_calls:
            kept = tuple(c for c in m.tool_calls if c.id in result_ids)
            if not kept:
                dropped += 1
                continue
            out.append(m if len(kept) == len(m.tool_calls) else replace(m, tool_calls=kept))
        else:
            out.append(m)
    return out, dropped


def _space_user_runs(messages: list[Message]) -> list[Message]:
    """OpenHands `_apply_user_message_formatting`: a user message right after another user
    message starts with a blank line."""
    out: list[Message] = []
    for m in messages:
        if m.role == "user" and out and out[-1].role == "user":
            m = m.with_content(b"\n\n" + m.content)
        out.append(m)
    return out


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
    out, report = result.view, result.info
    if result.previous_info is not None:
        report[COMPACTION_EVENTS] = [result.previous_info, *report.get(COMPACTION_EVENTS, ())]
    if len(out) == len(h) and all(a is b for a, b in zip(out, h, strict=True)):
        return StageResult(h, report, ())
    return StageResult(out, report)
