"""Codex CLI's automatic compaction (SPEC-agents §2.5.5), outgoing phase, as a fold.

When the history reaches 90 % of the model's window (or the configured limit), Codex replaces
it by the initial context, the most recent real user messages (≤ 20 000 ~tokens) and one
summary message; later calls continue from that. ctxsim cannot ask a model for the summary: a
recorded one (the rollout's `compacted` line) is replayed, otherwise a placeholder of the
configured size stands in (§2.5.0.6).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    COMPACTION_EVENTS,
    approx_tokens,
    compaction_event,
    fold,
    leading_system_len,
    placeholder_message,
    placeholder_text,
)
from ..messages import Message, replacement_sent
from ..token_model import (
    compared,
    dropped_before,
    shown_after,
    step_call,
    unit_of,
    unit_words,
)
from ..tokens import extras_tokens, tokens_by_identity
from . import StageContext, StageResult, view_result
from ._codex import (
    NO_SUMMARY,
    SUMMARY_PREFIX,
    call_of,
    estimate_tokens,
    is_contextual,
    is_real_user_message,
    model_row,
    truncate_tokens,
)
from ._codex_facts import InputFacts
from .codex_tool_output import session_meta

NAME = "codex_autocompact"


@dataclass(frozen=True)
class State:
    anchor: int | None = None  # index in the input of the last message the summary covers
    replacement: tuple[Message, ...] = ()
    replacement_tokens: int = 0


def limits(ctx: StageContext) -> tuple[int | None, int | None]:
    """(window, limit) — None: unknown window / never compacts."""
    config = ctx.params.get("codex_config") or {}
    session = session_meta(ctx)
    window = config.get("model_context_window")
    if window is None and isinstance(session.get("model_context_window"), int):
        window = session["model_context_window"]
    if window is None:
        row = model_row(config.get("model") or session.get("model"))
        window = row[1] if row else None
    limit90 = window * 9 // 10 if window is not None else None
    configured = config.get("model_auto_compact_token_limit")
    if configured is None:
        return window, limit90
    if ctx.params.get("codex_limit_semantics", "min") == "override" or limit90 is None:
        return window, configured
    return window, min(configured, limit90)


class _Run:
    """One stage run: the input, its costs (prefix sums) and the per-call step."""

    def __init__(self, history: tuple[Message, ...], ctx: StageContext):
        self.h = history
        self.ctx = ctx
        p = ctx.params
        self.prefixes = tuple(p.get("codex_contextual_prefixes") or ())
        self.budget = p.get("codex_user_message_budget", 20000)
        self.mode = p.get("codex_autocompact_mode", "predict")
        self.source = p.get("codex_token_source", "anchored")
        self.usage = self.source == "usage"
        self.placeholder_tokens = p.get("summary_placeholder_tokens", 2000)
        self.window, self.limit = limits(ctx)
        self.lead = leading_system_len(history)
        self.extras = extras_tokens(ctx.counter, "", ctx.tools, ctx.response_schema)
        # Costs by identity: the same message objects come back at every call.
        self.costs: dict[int, tuple[Message, int]] = (
            ctx.memo.setdefault("costs", {}) if ctx.memo is not None else {})
        facts = InputFacts.of(history, ctx, self.cost)
        self.positions, self.markers, self.hidden = facts.positions, facts.markers, facts.hidden
        self.prefix, self.estimates, self.usage_at = facts.prefix, facts.estimates, facts.usage_at
        self.hidden_set = set(self.hidden)

    def state(self, anchor: int | None, replacement: tuple[Message, ...]) -> State:
        return State(anchor, replacement, sum(self.cost(m) for m in replacement))

    def cost(self, m: Message) -> int:
        return tokens_by_identity(self.costs, m, self.ctx.counter)

    # --- views ---------------------------------------------------------------------------

    def view(self, n: int, s: State) -> tuple[list[Message], list[int | None]]:
        """V(P, s) for P = input[:n], with each message's index in the input (None: not
        from it)."""
        lead = min(self.lead, n)
        start = (s.anchor if s.anchor is not None else lead - 1) + 1
        msgs = list(self.h[:lead]) + list(s.replacement)
        src: list[int | None] = list(range(lead)) + [None] * len(s.replacement)
        for i in range(start, n):
            if i not in self.hidden_set:
                msgs.append(self.h[i])
                src.append(i)
        return msgs, src

    def tokens(self, view: Sequence[Message]) -> int:
        if not self.usage:
            return sum(self.cost(m) for m in view) + self.extras
        return self.usage_tokens(view)

    def prompt_tokens(self, n: int, s: State) -> int:
        """full_prompt(V(P, s)) under the counter, whatever the token source."""
        lead, start = self._start(n, s)
        hidden = [i for i in self.hidden[bisect_left(self.hidden, start):] if i < n]
        return (self.extras + self.prefix[lead] + s.replacement_tokens
                + self.prefix[n] - self.prefix[start]
                - sum(self.cost(self.h[i]) for i in hidden))

    def _start(self, n: int, s: State) -> tuple[int, int]:
        lead = min(self.lead, n)
        return lead, (s.anchor if s.anchor is not None else lead - 1) + 1

    def view_reasoning(self, n: int, s: State) -> int | None:
        """The reasoning V(P, s) sends back (SPEC §11): after a compaction, that of the
        assistant messages since the anchor in the current user turn (the compacted turn's
        reasoning items are gone); None without one (the transcript's own)."""
        if s.anchor is None:
            return None
        total = 0
        for i in range(n - 1, s.anchor, -1):
            m = self.h[i]
            if m.role == "user":
                break
            spent = m.meta.get("reasoning_tokens") if m.role == "assistant" else None
            if isinstance(spent, int) and spent > 0:
                total += spent
        return total

    def view_len(self, n: int, s: State) -> int:
        """len(V(P, s)) for P = input[:n], without building the view."""
        lead, start = self._start(n, s)
        hidden = bisect_left(self.hidden, n) - bisect_left(self.hidden, start)
        return lead + len(s.replacement) + max(0, n - start) - hidden

    def view_tokens(self, n: int, s: State, call: int | None = None) -> int:
        """tokens(V(P, s)) from the prefix sums, without building the view: the figure the
        limit is compared with (SPEC-agents §2.5.0.10) at `call` (default: this call)."""
        if not self.usage:
            return compared(self.ctx, self.prompt_tokens(n, s), self.view_len(n, s), call,
                            self.source, self.view_reasoning(n, s),
                            dropped_before(self.h, s.anchor))
        _, start = self._start(n, s)
        hidden = [i for i in self.hidden[bisect_left(self.hidden, start):] if i < n]
        return self._usage_from_sums(n, s, start, hidden)

    def _usage_from_sums(self, n: int, s: State, start: int, hidden: list[int]) -> int:
        k = bisect_left(self.usage_at, n) - 1
        if k >= 0 and self.usage_at[k] >= start:
            at = self.usage_at[k]
            return self.usage_tokens([m for i, m in enumerate(self.h[at:n], at)
                                      if i not in self.hidden_set])
        if not s.replacement and start <= self.lead:
            own = self.estimates[n] - self.estimates[start]
            return own - sum(estimate_tokens(self.h[i]) for i in hidden)
        view, _ = self.view(n, s)
        return self.usage_tokens(view)

    def usage_tokens(self, view: Sequence[Message]) -> int:
        """Last recorded API total after the anchor + Codex's estimate of what followed."""
        estimate = estimate_tokens
        first_own = next((k for k, m in enumerate(view) if m.role != "system"), len(view))
        for k in range(len(view) - 1, first_own - 1, -1):
            m = view[k]
            usage = m.meta.get("usage") if m.role == "assistant" else None
            total = usage.get("total_tokens") if isinstance(usage, Mapping) else None
            if isinstance(total, int) and not isinstance(total, bool):
                return total + sum(estimate(x) for x in view[k + 1:])
        return sum(estimate(m) for m in view if m.role != "system")

    # --- compaction ----------------------------------------------------------------------

    def compact(self, n: int, j: int, s: State, view: list[Message], src: list[int | None],
                phase: str, tokens: int, summary: Message | None) -> tuple[State, dict] | None:
        """The local algorithm on `view` (P = input[:n]); None when there is nothing to
        compact. `summary`: the recorded compaction message whose text is used as is."""
        if phase == "pre_turn":
            last = max((k for k, m in enumerate(view) if m.role == "assistant"), default=None)
            if last is None:
                return None
            split = last + 1
        else:
            split = len(view)
        head = view[:split]
        context: list[Message] = []
        real: list[Message] = []
        for m in head:
            if is_real_user_message(m, self.prefixes):
                real.append(m)
            elif not real and is_contextual(m, self.prefixes):
                context.append(m)
        selected: list[Message] = []
        remaining = self.budget
        for m in reversed(real):
            if remaining == 0:
                break
            need = approx_tokens(len(m.content))
            if need <= remaining:
                # Codex keeps the text only; the same message object when that is all it has.
                plain = not m.meta.get("binary_parts")
                selected.append(m if plain else Message.of("user", m.content, origin=m.origin))
                remaining -= need
            else:
                selected.append(Message.of("user", truncate_tokens(m.content, remaining),
                                           origin=m.origin))
                break
        selected.reverse()
        if summary is not None:
            message = summary if summary.content else Message.of("user", NO_SUMMARY)
            source = "recorded"
        else:
            items = sum(1 for m in head if m.role != "system")
            text = placeholder_text(NAME, items, tokens, j, self.placeholder_tokens,
                                    self.ctx.counter)
            message = placeholder_message("user", SUMMARY_PREFIX + "\n" + text)
            source = "placeholder"
        anchor = src[split - 1] if split else None
        if anchor is None:
            anchor = n - 1 if phase == "mid_turn" else s.anchor
        state = self.state(anchor, (*context, *selected, message))
        return state, {
            "summary_source": source,
            "selected_user_messages": len(selected),
            "user_message_tokens": sum(approx_tokens(len(m.content)) for m in selected),
        }

    def step(self, s: State, history: Sequence[Message], n: int, j: int
             ) -> tuple[State, tuple[Message, ...], Any]:
        """Call j on the prefix history[:n]; only the current call (j = m) is reported."""
        current = j == len(self.positions)
        phase = "pre_turn"
        if j > 0 and self.h[self.positions[j - 1]].tool_calls:
            phase = "mid_turn"
        tokens_before = self.view_tokens(n, s, step_call(self.ctx, history, n, j))
        fires = self.limit is not None and tokens_before >= self.limit
        predicted = self.mode == "predict" and fires
        # A marker on the response itself (index n) belongs to this call too (§2.5.0.4 r(i)),
        # although the call that made it could not see it yet.
        mine = [(i, mk) for i, mk in self.markers if call_of(i, self.positions) == j]
        info: dict[str, Any] = {}
        applied_recorded = False
        reason = None
        if mine and (self.mode == "recorded" or fires):
            for i, marker in mine:
                view, src = self.view(n, s)
                kept = replacement_sent(marker)
                if kept is not None:
                    s = self.state(i, tuple(kept))
                    info = {"summary_source": "recorded"}
                else:
                    recorded = self.h[i] if marker.get("kind") == "summary" else None
                    if recorded is not None and not recorded.content:
                        recorded = None  # an empty `message`: the placeholder stands in
                    done = self.compact(n, j, s, view, src, phase, tokens_before, recorded)
                    if done is None:
                        reason = "nothing_to_compact"
                        continue
                    s, info = done
                applied_recorded = True
        elif predicted:
            view, src = self.view(n, s)
            done = self.compact(n, j, s, view, src, phase, tokens_before, None)
            if done is None:
                reason = "nothing_to_compact"
            else:
                s, info = done
        if not current:
            late = None
            if any(i == n for i, _ in mine):
                late_kind = _kind(True, applied_recorded, predicted, True) or "recorded"
                late = {"call_index": j, **compaction_event(
                    NAME, late_kind, "recorded" if applied_recorded else None,
                    info.get("summary_source"), tokens_before, None)}
            return s, (), late
        after, _ = self.view(n, s)
        compacted = applied_recorded or bool(info)
        report: dict[str, Any] = {
            "compacted": compacted,
            "trigger": ("recorded" if applied_recorded else "predicted" if compacted
                        else None),
            "phase": phase,
            "limit": self.limit,
            "window": self.window,
            "tokens_before": tokens_before,
            "tokens_after": self.prompt_tokens(n, s),
            "summary_source": info.get("summary_source"),
            "selected_user_messages": info.get("selected_user_messages", 0),
            "user_message_tokens": info.get("user_message_tokens", 0),
            "recorded": bool(mine),
            "predicted": predicted,
            "token_source": self.source,
            "token_unit": unit_of(self.ctx, self.source),
        }
        if report["token_unit"] == "provider":  # the view it left, in before's unit (§11)
            report["tokens_after_compared"] = self.view_tokens(n, s)
        kind = _kind(bool(mine), applied_recorded, predicted, compacted)
        if kind is not None:
            report[COMPACTION_EVENTS] = [compaction_event(
                NAME, kind, report["trigger"], report["summary_source"], tokens_before,
                report["tokens_after"])]
        if reason and not compacted:
            report["reason"] = reason
        return s, tuple(after), report


def _kind(recorded: bool, applied: bool, predicted: bool, compacted: bool) -> str | None:
    if recorded and not applied:
        return "recorded_not_predicted"
    if applied:
        return "predicted_and_recorded" if predicted else "recorded"
    return "predicted" if compacted else None


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Replace the history by Codex's compacted history when the limit is reached.

    Invariant: a pure function of the input — the decisions of earlier calls are recomputed
    from the input's prefixes (the memo only skips repeated work); without a compaction in
    effect the output is the input minus recorded compaction messages.
    """
    h = tuple(history)
    work = _Run(h, ctx)
    # Past steps read the response (a marker can sit on it), so the current step's state is
    # not reused at the next call.
    result = fold(h, ctx, State(), work.step, reuse_current=False)
    out, report = result.view, result.report()
    return view_result(h, out, report)


# --- what the report means (registry.StageDef) ---------------------------------------------

def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("compacted") else 0


def describe(report: Mapping[str, Any]) -> str:
    phase = str(report.get("phase", "")).replace("_", "-")
    if report.get("compacted"):
        return (f"Compacted {phase} ({report.get('trigger')}, {report.get('summary_source')} "
                f"summary, {report.get('selected_user_messages')} user messages kept): "
                f"{report.get('tokens_before')} → {shown_after(report)} tokens.")
    if report.get("limit") is None:
        return (f"{report.get('tokens_before')} tokens; no auto-compaction limit (unknown "
                "window: set codex_config.model_context_window).")
    recorded = " (a recorded compaction here was not reached)" if report.get("recorded") else ""
    return (f"{report.get('tokens_before')} tokens, below the limit {report.get('limit')} "
            f"{phase}{recorded}.")


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    limits = [r.get("limit") for r in facts.reports if r]
    peak = max((r.get("tokens_before") or 0 for r in facts.reports), default=0)
    if not limits:
        return None
    if limits[-1] is None:
        return ("Codex auto-compaction never fired: the model's context window is unknown, so "
                "Codex would not compact (set codex_config.model_context_window).")
    return (f"Codex auto-compaction never fired: the history peaked at {peak:,} tokens"
            f"{unit_words(facts.reports)}, below the limit of {limits[-1]:,} tokens (90 % of "
            "the window, or the configured "
            "model_auto_compact_token_limit).")


def measures_billed(values: Mapping[str, Any]) -> bool:
    """Token source `usage`: the stage measures in the provider's recorded tokens, which a
    calibration must not convert again."""
    return values.get("codex_token_source", "anchored") == "usage"


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    """The chart's line: the limit from `codex_config` (the session's recorded window is not
    known here; without a configured window or model, none)."""
    config = values.get("codex_config") or {}
    window = config.get("model_context_window")
    if window is None:
        row = model_row(config.get("model"))
        window = row[1] if row else None
    limit90 = window * 9 // 10 if window is not None else None
    configured = config.get("model_auto_compact_token_limit")
    if configured is None:
        return "auto-compaction limit", limit90
    if values.get("codex_limit_semantics", "min") == "override" or limit90 is None:
        return "auto-compaction limit", configured
    return "auto-compaction limit", min(configured, limit90)
