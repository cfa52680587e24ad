"""AIVAX `toolContextCount` (SPEC §2.3): older tool messages keep their place, not their text."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from typing import Any

from ..history import History, Prefix
from ..messages import Message
from . import ReplayFacts, Since, StageContext, StageResult, handed_on, other_objects


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Replace the content of every tool message but the N most recent (N = 0: off).

    Invariant: no message is added, removed or moved; `kept + replaced` = all tool messages.

    A gateway stage's work is redone at every call (nothing it makes persists), so its memo
    keeps what it made: its previous output, updated where the input holds other objects
    (`other_objects`), for the appended messages and for the results that became older, as a
    `History` sharing every chunk they left alone; the tool positions; and one placeholder
    object per replaced message, handed out again at every call, so the replay measures each
    once by identity (issue 31: a new placeholder per older result per call was most of
    `aivax`'s quadratic replay).
    """
    count = ctx.params.get("toolContextCount") or 0
    placeholder = ctx.params.get("toolContextPlaceholder", "").encode("utf-8", "surrogatepass")
    memo = ctx.memo if ctx.memo is not None else {}
    made: dict[int, tuple[Message, Message]] = memo.setdefault("placeholders", {})

    def replaced(src: Message) -> Message:
        hit = made.get(id(src))
        if hit is None or hit[0] is not src or hit[1].content != placeholder:
            hit = made[id(src)] = (src, src.with_content(placeholder))
        return hit[1]

    seen: Sequence[Message] = memo.get("input", ())
    last: History | None = memo.get("output")
    tools: list[int] | None = memo.get("tools")
    changed = other_objects(seen, history) if len(history) >= len(seen) else None
    was = 0
    since = None  # the previous output this one is built from
    if (changed is not None and tools is not None and last is not None
            and all(history[i].role == seen[i].role for i in changed)):
        # From the previous output: what changed in the input, and what was appended.
        start = len(seen)
        # In place: the list is only ever appended to (a reset makes a new one), so the
        # `Prefix` views of it handed out at earlier calls still hold what they held.
        tools.extend(i for i in range(start, len(history)) if history[i].role == "tool")
        was = memo.get("older", 0)
        out = since = last
        for i in range(start, len(history)):
            out = out.append(history[i])
        changes = {i: history[i] for i in changed}
    else:  # the first call, or an input the memo cannot follow: from scratch
        tools = [i for i, m in enumerate(history) if m.role == "tool"]
        out, changed, changes = History.of(history), [], {}
    older = max(len(tools) - count, 0) if count > 0 else 0
    if older < was:  # fewer older results than before: from scratch
        out, changed, changes, was, since = History.of(history), [], {}, 0, None
    newly = tools[was:older]
    for i in newly:  # newly older results get their placeholder
        changes[i] = replaced(history[i])
    for i in changed:  # and older ones whose message changed (`tools` is ascending)
        k = bisect_left(tools, i)
        if k < older and tools[k] == i:
            changes[i] = replaced(history[i])
    memo.update(input=history, tools=tools, older=older)
    report = {"kept": len(tools) - older, "replaced": older}
    if not older:
        memo["output"] = History.of(history)
        return StageResult(handed_on(history), report, ())
    # A `History` shares the chunks no change touched with the previous output.
    result = memo["output"] = out.replaced(changes)
    # Against the previous output, only the input's changes and the newly older results
    # differ (and what was appended): the replay measures those, not every older result.
    return StageResult(result, report, Prefix(tools, older),
                       None if since is None else Since(since, tuple(changes)))

# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return report.get("replaced", 0)


def describe(report: Mapping[str, Any]) -> str:
    return f"{report.get('kept', 0)} tool messages kept, {report.get('replaced', 0)} replaced."


def quiet_note(facts: ReplayFacts) -> str | None:
    if facts.total("replaced"):
        return None
    count = facts.value("toolContextCount")
    return "Tool context never replaced a result: " + (
        "it is off (toolContextCount 0)." if not count
        else f"no call held more than {count} tool messages."
    )
