"""Calibration (SPEC §11): from ctxsim's estimates to what the provider would have billed.

A transcript leaves out what the agent adds to every request (system prompt, tool
definitions, reminders), and Claude's tokenizer is not public. Per session and counter the
recorded input of each call is fitted as `total_input ≈ a + b · estimate`, where `estimate`
is the call's raw history under profile `none`: `a` is the unrecorded prompt, `b` the
tokenizer factor. The fit is Theil–Sen (median of pairwise slopes), so one call with injected
context cannot tilt it; calls whose recorded total is more than max(500, 5 %) away from the
fit are flagged and left out, and the fit is redone without them. With fewer than three calls
`a` comes from the first call and `b` from a dated table. A session without usage has no
calibration.

Cost: one pass over the history (the counter's content cache makes it a lookup per message)
and a fit over the calls with usage, once per session and counter, never per call.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .messages import Message, replacement_sent
from .tokens import TokenCounter, extras_tokens, get_counter, message_tokens
from .usage import message_recorded

# SPEC §11's dated table (2026): counter → provider family → tokens billed per estimated token.
FACTOR_TABLE: dict[str, dict[str, float]] = {
    "cl100k_base": {"anthropic": 1.22, "openai": 1.00},
    "o200k_base": {"anthropic": 1.22, "openai": 1.00},
}
FLAG_TOKENS = 500
FLAG_SHARE = 0.05
# Counted tokens of the reminder's own words around a repeated TodoWrite list [X: about two
# sentences; the transcripts do not record them, and 0 or 40 measure alike (README)].
TODO_REMINDER_FRAME = 40
# Counted tokens of the `<system-reminder>` tags around a recorded injection (an attachment
# record: `meta["injected_context"]`, importers/claude_code_attachments.py) [X: the tags and
# their line breaks in cl100k_base; the wording around some types is not recorded].
INJECTED_FRAME = 10
# A line of a file as Claude Code's Read (and an Edit's snippet) shows it, `cat -n` style: the
# line number right-aligned in six columns, then `→` (a tab in early 1.0 releases: 1.0.17).
# Counted only in a tool result holding at least NUMBERED_MIN such lines, the first of them
# within its first NUMBERED_WITHIN bytes (a Read starts with them, an edit's snippet after one
# sentence): scanning every tool result whole took 50 ms for a generated 200-call session's
# 5 MB of results, a third of its warm replay.
NUMBERED_LINE = re.compile("^ *[0-9]+(?:→|\t)".encode(), re.MULTILINE)
_NUMBER_ENDS = ("→".encode(), b"\t")  # looked for first: a byte search, not a pattern's
NUMBERED_MIN = 3
NUMBERED_WITHIN = 1024
# Exact Theil–Sen up to this many calls (n·(n-1)/2 slopes); beyond it a fixed, spread-out
# subset of pairs keeps the fit linear in practice.
EXACT_PAIRS_UP_TO = 400
MAX_PAIRS = 60_000


@dataclass(frozen=True)
class CallEstimate:
    """One model call as the replay numbers it, with its raw estimate under profile `none`."""

    call_index: int
    response_input_index: int | None
    estimate: int
    recorded: int | None
    # For the token model (`token_model.py`): the raw prompt's number of messages, and what
    # the agent itself sent (`agent_*`): the raw prompt from the latest recorded compaction
    # on (its leading system messages, the marked message and what followed), which is what
    # the provider billed. Without a recorded compaction both equal the raw prompt's.
    messages: int = 0
    agent_estimate: int = 0
    agent_messages: int = 0
    reasoning: int = 0  # the part of both estimates that is reasoning sent back (SPEC §11)
    # The agent's prompt's assistant messages whose response recorded its output: their
    # estimate, and what the bill says they cost (recorded `output` − `reasoning`, the
    # visible text and tool calls the provider generated, which the next prompt sends back).
    output_estimate: int = 0
    output_recorded: int = 0
    # Counted tokens of context the agent sent that the transcript does not show (`reminders`),
    # in the agent's prompt so far; never part of `estimate` or `agent_estimate`.
    hidden: int = 0
    # Where the agent's prompt starts in the transcript: the latest recorded compaction's
    # marked message, else the first message after the leading system block.
    agent_from: int = 0
    # Counted tokens of the line-number prefixes of numbered file lines (`NUMBERED_LINE`) in
    # the agent's prompt so far: part of `agent_estimate`, priced apart by the token model.
    numbered: int = 0


@dataclass(frozen=True)
class Calibration:
    counter: str
    a: float
    b: float
    method: str  # theil-sen | table | two-point | offset
    calls_used: int
    residual_sd: float | None
    flagged: tuple[dict[str, int], ...] = ()

    def value(self, estimate: int | None) -> int | None:
        """The calibrated value of an estimate: what the provider would have billed."""
        if estimate is None:
            return None
        return max(0, round(self.a + self.b * estimate))

    def as_json(self) -> dict[str, Any]:
        return {
            "counter": self.counter,
            # Unrounded, so a stored calibration gives the same calibrated values as a
            # fresh one (the trace of a stored session equals `simulate`'s, number for number).
            "a": self.a,
            "b": self.b,
            "method": self.method,
            "calls_used": self.calls_used,
            "residual_sd": None if self.residual_sd is None else round(self.residual_sd, 1),
            "flagged": [dict(f) for f in self.flagged],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Calibration | None:
        if not data:
            return None
        return cls(data["counter"], float(data["a"]), float(data["b"]), data["method"],
                   int(data["calls_used"]), data.get("residual_sd"),
                   tuple(data.get("flagged") or ()))

    @property
    def flagged_calls(self) -> frozenset[int]:
        return frozenset(f["call_index"] for f in self.flagged)


def call_estimates(
    messages: Sequence[Message],
    counter: TokenCounter,
    image_rule: str = "auto",
    tools: Any = None,
    response_schema: Any = None,
    reminders: bool = False,
    line_numbers: bool = False,
) -> list[CallEstimate]:
    """Every model call's raw estimate under profile `none`, numbered as the replay numbers
    them (one call before each assistant message, plus the trailing call). `reminders`: the
    agent repeats each TodoWrite list in a reminder the transcript does not record (Claude
    Code before 1.0.98, `token_model.todo_reminders`), counted in `hidden` as the call's
    arguments plus `TODO_REMINDER_FRAME`. Context the agent injected that the transcript
    records beside its messages (`meta["injected_context"]`: Claude Code's attachment
    records, recorded before the message that carries them) is counted in `hidden` too,
    each text plus `INJECTED_FRAME`. `line_numbers`: count the line-number prefixes of the
    numbered file lines tool results show (`numbered_prefix_tokens`, Claude Code).

    Invariant: equals `Replay(profile none).calls()`'s `raw_tokens`, call for call (tested),
    without running the replay.
    """
    extras = tokens = extras_tokens(counter, "", tools, response_schema)
    reasoning: dict[int, int] = {}
    turn_reasoning = 0
    out: list[CallEstimate] = []
    lead = lead_tokens = 0  # the leading system messages
    agent_tokens, agent_from = tokens, 0  # the agent's prompt: messages[agent_from:] + lead
    replaced = 0  # messages of a recorded replacement history the agent's prompt starts with
    output_estimate = output_recorded = hidden = numbered = 0

    def point(response: int | None, recorded: int | None, n: int) -> CallEstimate:
        return CallEstimate(len(out), response, tokens + turn_reasoning, recorded, n,
                            agent_tokens + turn_reasoning, lead + replaced + n - agent_from,
                            turn_reasoning, output_estimate, output_recorded, hidden, agent_from,
                            numbered)

    for index, m in enumerate(messages):
        injected = m.meta.get("injected_context")
        if m.role == "assistant":
            hidden += injected_tokens(injected, counter) if injected else 0
            recorded = message_recorded(m)
            out.append(point(index, recorded["total_input"] if recorded else None, index))
            spent = m.meta.get("reasoning_tokens")
            if isinstance(spent, int) and spent > 0:
                reasoning[index] = spent
                turn_reasoning += spent
        elif m.role == "user" and reasoning:
            reasoning, turn_reasoning = {}, 0
        cost = message_tokens(m, counter, image_rule)
        if m.role == "system" and lead == index:
            lead, lead_tokens = index + 1, lead_tokens + cost
            agent_from = lead
        elif isinstance(m.meta.get("compaction"), Mapping):
            agent_tokens, agent_from = extras + lead_tokens, index
            output_estimate = output_recorded = hidden = numbered = 0
            # A recorded replacement history (Codex's remote compaction) is what the agent
            # sends in place of what it compacted: its prompt starts with it.
            kept = replacement_sent(m.meta["compaction"]) or []
            replaced = len(kept)
            agent_tokens += sum(message_tokens(r, counter, image_rule) for r in kept)
        if injected and m.role != "assistant":
            hidden += injected_tokens(injected, counter)
        if m.role == "assistant":
            visible = _visible_output(recorded)
            if visible is not None:
                output_estimate, output_recorded = output_estimate + cost, output_recorded + visible
            if reminders:
                hidden += sum(counter.count(c.arguments.encode()) + TODO_REMINDER_FRAME
                              for c in m.tool_calls if c.name == "TodoWrite")
        elif line_numbers and m.role == "tool":
            numbered += numbered_prefix_tokens(m.content, counter)
        tokens += cost
        agent_tokens += cost
    if not messages or not (messages[-1].role == "assistant" and not messages[-1].tool_calls):
        out.append(point(None, None, len(messages)))
    return out


def numbered_prefix_tokens(content: bytes, counter: TokenCounter) -> int:
    """Counted tokens of the line-number prefixes in a tool result that shows a file's lines
    numbered (`NUMBERED_LINE`: at least NUMBERED_MIN of them, one in its first
    NUMBERED_WITHIN bytes): its count less the count of the same text without them; 0 for any
    other content."""
    if (all(content.find(end, 0, NUMBERED_WITHIN) < 0 for end in _NUMBER_ENDS)
            or NUMBERED_LINE.search(content, 0, NUMBERED_WITHIN) is None
            or len(NUMBERED_LINE.findall(content)) < NUMBERED_MIN):
        return 0
    return max(counter.count(content) - counter.count(NUMBERED_LINE.sub(b"", content)), 0)


def _visible_output(recorded: Mapping[str, Any] | None) -> int | None:
    """The recorded output of a response less its reasoning; None when not recorded."""
    if not recorded or not isinstance(recorded.get("output"), int):
        return None
    visible = recorded["output"] - (recorded.get("reasoning") or 0)
    return visible if visible >= 0 else None


def _pairs(n: int) -> list[tuple[int, int]]:
    if n <= EXACT_PAIRS_UP_TO:
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    # Pairs at a spread of distances: every point takes part, near and far pairs both count.
    steps = max(1, MAX_PAIRS // n)
    offsets = sorted({max(1, (n * k) // (2 * steps)) for k in range(1, steps + 1)})
    return [(i, i + d) for d in offsets for i in range(n - d)]


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """(a, b) of the Theil–Sen line, or None when every x is the same."""
    slopes = [
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i, j in _pairs(len(xs))
        if xs[j] != xs[i]
    ]
    if not slopes:
        return None
    b = statistics.median(slopes)
    a = statistics.median(y - b * x for x, y in zip(xs, ys, strict=True))
    return a, b


def _is_off(recorded: int, calibrated: float) -> bool:
    return abs(recorded - calibrated) > max(FLAG_TOKENS, FLAG_SHARE * recorded)


def fit(points: Sequence[CallEstimate], counter: str, provider: str | None = None
        ) -> Calibration | None:
    """Calibrate from the calls with recorded usage; None when there are none.

    Invariant: a flagged call is more than max(500, 5 %) away from the returned line, and
    every call the line was fitted on is within it (method theil-sen)."""
    used = [(p.call_index, p.estimate, p.recorded) for p in points
            if p.recorded is not None and p.recorded > 0]
    if not used:
        return None
    line: tuple[float, float] | None = None
    method = "theil-sen"
    if len(used) >= 3:
        kept = used
        for _ in range(4):  # flag, refit without the flagged calls, until it settles
            line = theil_sen([x for _, x, _ in kept], [y for _, _, y in kept])
            if line is None:
                break
            a, b = line
            still = [u for u in used if not _is_off(u[2], a + b * u[1])]
            if len(still) < 3 or still == kept:
                break
            kept = still
    if line is None:
        line, method = _fallback(used, counter, provider)
    a, b = line
    flagged: list[dict[str, int]] = []
    residuals: list[float] = []
    for call_index, estimate, recorded in used:
        calibrated = a + b * estimate
        if method == "theil-sen" and _is_off(recorded, calibrated):
            flagged.append({"call_index": call_index, "recorded": recorded,
                            "calibrated": round(calibrated),
                            "difference": recorded - round(calibrated)})
        else:
            residuals.append(recorded - calibrated)
    residual_sd = statistics.stdev(residuals) if len(residuals) >= 2 else None
    return Calibration(counter, a, b, method, len(residuals), residual_sd, tuple(flagged))


def _fallback(used: Sequence[tuple[int, int, int]], counter: str, provider: str | None
              ) -> tuple[tuple[float, float], str]:
    """Fewer than three calls (or no spread): `a` from the first call, `b` from the table;
    bytes4 has no table entry, so its factor is measured from two calls when there are two."""
    table = FACTOR_TABLE.get(counter)
    _, x0, y0 = used[0]
    _, x1, y1 = used[-1]
    if table is not None:
        b = table.get(provider or "", table["openai"])
        method = "table"
    elif len(used) >= 2 and x1 != x0:
        b = (y1 - y0) / (x1 - x0)
        method = "two-point"
    else:
        b, method = 1.0, "offset"
    return (y0 - b * x0, b), method


def calibrate(
    messages: Sequence[Message],
    counter: str | TokenCounter = "cl100k_base",
    *,
    image_rule: str = "auto",
    tools: Any = None,
    response_schema: Any = None,
    provider: str | None = None,
) -> Calibration | None:
    """The session's calibration for one counter (None: the transcript records no usage)."""
    token_counter = get_counter(counter) if isinstance(counter, str) else counter
    if not any(m.role == "assistant" and message_recorded(m) for m in messages):
        return None
    points = call_estimates(messages, token_counter, image_rule, tools, response_schema)
    return fit(points, token_counter.name, provider)


def relative_errors(points: Sequence[CallEstimate], calibration: Calibration) -> list[float]:
    """|calibrated raw − recorded| / recorded for every call with usage."""
    return [
        abs((calibration.value(p.estimate) or 0) - p.recorded) / p.recorded
        for p in points
        if p.recorded
    ]


def injected_items(injected: Any, counter: TokenCounter) -> list[dict[str, Any]]:
    """A message's recorded injections (`meta["injected_context"]`, `{"type", "name",
    "text"}`) as `{"type", "name", "tokens"}`: the name and text the reminder shows, counted,
    plus `INJECTED_FRAME`."""
    items = []
    for item in injected if isinstance(injected, Sequence) else ():
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            continue
        name = item.get("name") if isinstance(item.get("name"), str) else ""
        shown = f"{name}\n{item['text']}" if name else item["text"]
        items.append({"type": str(item.get("type", "")), "name": name, "tokens": INJECTED_FRAME
                      + counter.count(shown.encode("utf-8", "surrogatepass"))})
    return items


def injected_tokens(injected: Any, counter: TokenCounter) -> int:
    """Counted tokens of a message's recorded injections (`injected_items`)."""
    return sum(item["tokens"] for item in injected_items(injected, counter))


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile (share in 0..1) of `values`."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(share * len(ordered)))
    return ordered[rank - 1]
