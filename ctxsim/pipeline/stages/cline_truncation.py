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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents_common import COMPACTION_EVENTS, assistant_positions, compaction_event, fold
from ..messages import Message
from . import StageContext, StageResult, view_result
from ._agents2 import Costs, compared_tokens, describe_compaction, event_kind, lead_len
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


def api_groups(conv: Sequence[Message]) -> list[tuple[int, list[int]]]:
    """(API index, positions of `conv`) per API message: each assistant one, each run between
    them one; the index is the importer's `meta.history_index` (the position in
    api_conversation_history.json) when every message has one, else the ordinal."""
    groups: list[list[int]] = []
    raw = [m.meta.get("history_index") for m in conv]
    exact = all(isinstance(x, int) and not isinstance(x, bool) for x in raw)
    index = [x if isinstance(x, int) else 0 for x in raw]
    for k, m in enumerate(conv):
        last = groups[-1][-1] if groups else None
        if last is None or m.role == "assistant" or conv[last].role == "assistant" or (
                exact and index[k] != index[last]):
            groups.append([k])
        else:
            groups[-1].append(k)
    return [(index[g[0]] if exact else n, g) for n, g in enumerate(groups)]


@dataclass(frozen=True)
class State:
    end: int | None = None  # the deleted range's end over API messages
    count: int = 0


class _Run:
    def __init__(self, h: tuple[Message, ...], ctx: StageContext):
        p = ctx.params
        self.h, self.ctx = h, ctx
        session = ctx.session if isinstance(ctx.session, Mapping) else {}
        self.window = context_window(p, session)
        self.limit = max_allowed(self.window)
        self.source = p.get("cline_token_source", "counter")
        self.recorded_mode = p.get("cline_mode", "predict") == "recorded"
        self.lead = lead_len(h)
        self.costs = Costs(ctx)
        self.markers = [i for i, m in enumerate(h) if _range(m) is not None]
        self.positions = assistant_positions(h, ctx)

    def view(self, n: int, s: State) -> list[Message]:
        conv = self.h[self.lead:n]
        if s.end is None:
            return list(self.h[:n])
        groups = api_groups(conv)
        out = list(self.h[:self.lead])
        for g, members in groups:
            if 2 <= g <= s.end:
                continue
            for k in members:
                m = conv[k]
                if g == 1 and k == members[0]:
                    m = Message.of("assistant", NOTICE, origin=m.origin,
                                   meta={"kind": "cline_notice"})
                elif g == s.end + 1 and m.role == "tool":
                    if not XML_CALL.fullmatch(m.tool_call_id):
                        continue  # the first kept user message loses its tool_result blocks
                    # An XML-era result is text in Cline's user message: it stays, as text.
                    m = Message.of("user", m.content, origin=m.origin, meta=m.meta)
                out.append(m)
        return out

    def step(self, s: State, h: Sequence[Message], n: int, j: int
             ) -> tuple[State, list[Message], dict[str, Any]]:
        view = self.view(n, s)
        # `usage` reads the transcript's totals as they stand: right for what Cline itself
        # truncated, too high after a what-if truncation (the anchored source corrects it).
        tokens, used = compared_tokens(self.costs, self.source, view, 0, "input_output")
        conv = self.h[self.lead:n]
        members = api_groups(conv)
        roles = {g: conv[ks[0]].role for g, ks in members}
        groups = members[-1][0] + 1 if members else 0  # N: the API history's length
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
            end = next_range(s.end, groups, keep,
                             lambda g: roles.get(g, "assistant") == "assistant")
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
        return s, self.view(n, s), info


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
    h = tuple(history)
    work = _Run(h, ctx)
    result = fold(h, ctx, State(), work.step, reuse_current=False)
    info, out = result.info, list(result.view)
    after = work.costs.prompt(out)
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": info["trigger"], "keep": info["keep"],
        "deleted_range": info["range"], "api_messages": info["api_messages"],
        "limit": work.limit, "window": work.window, "tokens_before": info["tokens_before"],
        "tokens_after": after, "token_source": info["token_source"],
        "summary_source": None, "recorded": info["recorded"],
        "truncations_so_far": result.state.count,
    }
    events = []
    prev = result.previous_info
    if prev and prev.get("late"):
        events.append(compaction_event(NAME, prev["late"], "recorded", None,
                                       prev["tokens_before"], None, result.call - 1))
    if info["kind"] is not None:
        events.append(compaction_event(
            NAME, info["kind"], info["trigger"], None, info["tokens_before"], after))
    if events:
        report[COMPACTION_EVENTS] = events
    return view_result(h, out, report)


def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("compacted") else 0


def describe(report: Mapping[str, Any]) -> str:
    if report.get("compacted"):
        return (f"Truncated (keep {report.get('keep') or 'recorded'}): range "
                f"{report.get('deleted_range')} of {report.get('api_messages')} API messages, "
                f"{report.get('tokens_before')} → {report.get('tokens_after')} tokens "
                f"({report.get('token_source')}).")
    return describe_compaction(report, "Truncated", "maxAllowedSize")


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    limits = [r.get("limit") for r in facts.reports if r]
    if not limits:
        return None
    peak = max((r.get("tokens_before") or 0 for r in facts.reports), default=0)
    return (f"Cline never truncated: the previous request's total peaked at {peak:,} tokens, "
            f"below maxAllowedSize {limits[-1]:,}.")


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    return "maxAllowedSize", max_allowed(context_window(values, {}))


def measures_billed(values: Mapping[str, Any]) -> bool:
    return values.get("cline_token_source", "counter") == "usage"
