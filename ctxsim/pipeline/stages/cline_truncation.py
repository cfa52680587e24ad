"""Cline's classic context truncation (ContextManager, VS Code extension 3.x; SPEC-agents-2
§3.1–3.3), outgoing, a fold over the deleted range.

Cline's API history alternates user and assistant messages: ctxsim groups the canonical
messages so (every assistant message one, each run of tool results and user text between
them one user message). Before each request, when the previous request's total (prompt +
output: `tokensIn + tokensOut + cacheWrites + cacheReads`) reached `maxAllowedSize`, the
deleted range `[2, end]` grows by half of what follows it (a quarter kept when the total is
over twice the limit); the first assistant message is replaced by Cline's notice and the tool
results of the first kept user message are dropped. Cline keeps its whole history on disk, so
the transcript shows no truncation; a recorded range (`meta.compaction = {"source": "cline",
"kind": "truncation", "deleted_range": [2, end]}` on the first message sent after it, from
ui_messages' `conversationHistoryDeletedRange`) is replayed. Not
simulated: the duplicate file-read replacement (which can avoid a truncation) and the opt-in
auto-condense.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import (
    fold,
    marker_positions,
)
from ..history import frozen
from ..messages import Message
from ..token_model import shown_after, step_call
from . import StageContext, StageResult, view_result
from ._agents2 import (
    AgentRun,
    Sums,
    add_late_events,
    compaction_activity,
    compared_tokens,
    describe_compaction,
    event_kind,
    measures_billed_by,
    quiet_peak,
    token_fields,
)
from ._codex import call_of

NAME = "cline_truncation"
# The importers' ids of XML-era calls (a tool tag in the assistant text): `<format>-<n>` [X].
XML_CALL = re.compile(r"(?:cline|roo-code)-\d+")
NOTICE = ("[NOTE] Some previous conversation history with the user has been removed to "
          "maintain optimal context window length. The initial user task has been retained for "
          "continuity, while intermediate conversation history has been removed. Keep this in "
          "mind as you continue assisting the user. Pay special attention to the user's latest "
          "messages.")


def context_window(params: Mapping[str, Any], session: Mapping[str, Any]) -> int:
    if params.get("cline_context_window"):
        return int(params["cline_context_window"])
    model = str(session.get("model") or "")
    return 200_000 if "claude" in model else 128_000


def max_allowed(window: int) -> int:
    """getContextWindowInfo's maxAllowedSize."""
    return {64_000: 37_000, 128_000: 98_000, 200_000: 160_000}.get(
        window, max(window - 40_000, int(window * 0.8)))


def next_range(previous_end: int | None, n: int, keep: str,
               is_assistant: Any = lambda k: k % 2 == 1) -> int:
    """The new range's end (inclusive) over `n` API messages (getNextTruncationRange): one
    less when the message there exists and is not an assistant message."""
    start_of_rest = previous_end + 1 if previous_end is not None else 2
    rest = n - start_of_rest
    removed = (rest // 4) * 2 if keep == "half" else int(rest * 3 / 4 / 2) * 2
    end = start_of_rest + removed - 1
    if not is_assistant(end):
        end -= 1
    return end


def starts_group(h: Sequence[Message], i: int, lead: int) -> int:
    """1 when message i opens an API message: every assistant message, the first message
    after one, and a message whose `meta.history_index` (the importer's position in
    api_conversation_history.json) differs from the one before it; else 0."""
    if i < lead:
        return 0
    if i == lead:
        return 1
    m, before = h[i], h[i - 1]
    if m.role == "assistant" or before.role == "assistant":
        return 1
    a, b = m.meta.get("history_index"), before.meta.get("history_index")
    return 1 if isinstance(a, int) and isinstance(b, int) and a != b else 0


@dataclass(frozen=True)
class State:
    end: int | None = None  # the deleted range's end over API messages
    count: int = 0


class _Run(AgentRun):
    def __init__(self, h: Sequence[Message], ctx: StageContext):
        super().__init__(h, ctx, "cline")
        self.window = context_window(ctx.params, self.session)
        self.limit = max_allowed(self.window)
        self.markers = [i for i in marker_positions(h, ctx, "compaction")
                        if _range(h[i]) is not None]
        lead = self.lead
        self.groups = Sums(h, ctx, "groups", lambda h, i: starts_group(h, i, lead)).sums

    # API messages: ordinal g (0, 1, …) of the groups, each starting at position start(g).

    def group_count(self, n: int) -> int:
        return self.groups[n]

    def group_start(self, g: int) -> int:
        """The input position where group ordinal g starts (after the last one: len)."""
        return bisect_left(self.groups, g + 1) - 1

    def api_index(self, g: int) -> int:
        """Cline's index of group g: the importer's history_index, else the ordinal."""
        first = self.group_start(g)
        x = self.h[first].meta.get("history_index") if first < len(self.h) else None
        return x if isinstance(x, int) and not isinstance(x, bool) else g

    def first_group_after(self, end: int, n: int) -> int:
        """The first group ordinal (below group_count(n)) whose API index is over `end`."""
        lo, hi = 0, self.group_count(n)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.api_index(mid) <= end:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def view(self, n: int, s: State) -> tuple[list[Message], int]:
        """The request for input[:n] under the range, and its full prompt (prefix sums)."""
        h, c = self.h, self.costs
        if s.end is None or self.group_count(n) <= 2:
            return list(h[:n]), c.extras + self.sums[n]
        g2 = self.group_start(2)
        after = self.first_group_after(s.end, n)
        kept_from = self.group_start(after) if after < self.group_count(n) else n
        first = self.group_start(1)
        out = list(h[:first])
        notice = Message.of("assistant", NOTICE, origin=h[first].origin,
                            meta={"kind": "cline_notice"})
        out.append(notice)
        out.extend(h[first + 1:g2])
        counted = (c.extras + self.sums[g2] - c.cost(h[first]) + c.cost(notice)
                   + self.sums[n] - self.sums[kept_from])
        k = kept_from
        while k < n and (k == kept_from or not starts_group(h, k, self.lead)):
            m = h[k]
            if m.role == "tool":
                counted -= c.cost(m)
                if not XML_CALL.fullmatch(m.tool_call_id):
                    k += 1
                    continue  # the first kept user message loses its tool_result blocks
                # An XML-era result is text in Cline's user message: it stays, as text.
                m = Message.of("user", m.content, origin=m.origin, meta=m.meta)
                counted += c.cost(m)
            out.append(m)
            k += 1
        out.extend(h[k:n])
        return out, counted

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        view, counted = self.view(n, s)
        # `usage` reads the transcript's totals as they stand: right for what Cline itself
        # truncated, too high after a what-if truncation (the anchored source corrects it).
        tokens, used = compared_tokens(self.costs, self.source, view, 0, "input_output",
                                       counted=counted, call=step_call(self.ctx, h, n, j))
        count = self.group_count(n)
        groups = self.api_index(count - 1) + 1 if count else 0  # N: the API history's length
        info: dict[str, Any] = {"tokens_before": tokens, "token_source": used, "keep": None,
                                "range": None, "recorded": False, "trigger": None,
                                "api_messages": groups}
        recorded_end = None
        at_response = False
        # The marker sits on the first message sent after the range changed: often the
        # response of this call (index n, r(i) = j).
        for i in (i for i in self.markers if i <= n and call_of(i, self.positions) == j):
            r = _range(self.h[i])
            if r is not None and (s.end is None or r[1] > s.end):
                recorded_end = r[1]
                at_response = i == n
        fires = tokens >= self.limit and groups > 2
        applied = False
        if recorded_end is not None and (self.recorded_mode or fires):
            s = State(recorded_end, s.count + 1)
            info.update(recorded=True, trigger="recorded")
            applied = True
        elif fires and not self.recorded_mode:
            keep = "quarter" if tokens / 2 > self.limit else "half"
            roles = self.role_of_api(n)
            end = next_range(s.end, groups, keep,
                             lambda g: roles(g) in ("assistant", None))
            if end >= (s.end if s.end is not None else 1) + 1:
                s = State(end, s.count + 1)
                info.update(keep=keep, trigger="predicted")
        info["recorded"] = recorded_end is not None
        info["compacted"] = info["trigger"] is not None
        info["kind"] = event_kind(info["recorded"], applied,
                                  info["trigger"] == "predicted" or (applied and fires))
        info["range"] = [2, s.end] if s.end is not None else None
        # A marker on the response is seen at the next call, and reported then.
        info["late"] = ("recorded" if applied else "recorded_not_predicted") if at_response \
            else None
        if j < len(self.positions):
            return s, [], info  # a past call: only its state is needed
        return s, self.view(n, s)[0], info

    def role_of_api(self, n: int) -> Any:
        """API index → the role of that API message (None: no such message)."""
        count = self.group_count(n)

        def role(k: int) -> str | None:
            lo, hi = 0, count
            while lo < hi:
                mid = (lo + hi) // 2
                if self.api_index(mid) < k:
                    lo = mid + 1
                else:
                    hi = mid
            if lo < count and self.api_index(lo) == k:
                return self.h[self.group_start(lo)].role
            return None
        return role


def _range(m: Message) -> tuple[int, int] | None:
    marker = m.meta.get("compaction")
    if not isinstance(marker, Mapping) or marker.get("source") != "cline":
        return None
    r = marker.get("deleted_range")
    if isinstance(r, (list, tuple)) and len(r) == 2 and all(
            isinstance(x, int) and not isinstance(x, bool) for x in r):
        return int(r[0]), int(r[1])
    return None


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Truncate the outgoing history as classic Cline would, from the call schedule.

    Invariant: a pure function of the input; the output keeps the leading system block, the
    first two API messages (the second as Cline's notice) and everything after the range."""
    h = frozen(history)
    work = _Run(h, ctx)
    result = fold(h, ctx, State(), work.step, reuse_current=False)
    info, out = result.info, list(result.view)
    after = work.view(len(h), result.state)[1]
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": info["trigger"], "keep": info["keep"],
        "deleted_range": info["range"], "api_messages": info["api_messages"],
        "limit": work.limit, "window": work.window, "tokens_before": info["tokens_before"],
        "tokens_after": after, **token_fields(ctx, info["token_source"], (after, len(out))),
        "summary_source": None, "recorded": info["recorded"],
        "truncations_so_far": result.state.count,
    }
    add_late_events(report, NAME, result, after, None, None)
    return view_result(h, out, report)


activity = compaction_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("compacted"):
        return (f"Truncated (keep {report.get('keep') or 'recorded'}): range "
                f"{report.get('deleted_range')} of {report.get('api_messages')} API messages, "
                f"{report.get('tokens_before')} → {shown_after(report)} tokens "
                f"({report.get('token_source')}).")
    return describe_compaction(report, "Truncated", "maxAllowedSize")


def quiet_note(facts: Any) -> str | None:
    quiet = quiet_peak(facts)
    if quiet is None:
        return None
    peak, limit = quiet
    return (f"Cline never truncated: the previous request's total peaked at {peak:,} tokens, "
            f"below maxAllowedSize {limit:,}.")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    return "maxAllowedSize", max_allowed(context_window(values, {}))


measures_billed = measures_billed_by("cline")
