"""The token model (SPEC §11, 2026-12): the provider's tokens of any prompt a profile sends.

Calibration explains the bill; a simulation must predict it for prompts no provider saw. For
call `i` and a prompt `S`, `real(S, i)` estimates the provider's `total_input`:

- **anchored** (the session records usage): `j` = the latest billed call ≤ `i` (before the first
  bill, the first one), `B_j` its bill and `R_j` the prompt the agent sent there (the raw
  history under profile `none`, from the latest recorded compaction on);
  `real(S, i) = B_j + f(S) − f(R_j)`. So the raw prompt of a billed call costs its bill
  exactly, and a simulated prompt costs the bill minus what the profile removed.
- **calibrated** (no usage, but the agent and provider family have a pooled prior):
  `a + b · estimate` from `PRIORS`.
- **counter**: the estimate itself.

The tokenizer model is `f(S) = b · estimate(S) + c · messages(S)`: `b` tokens billed per
counted token, `c` tokens per message the counter does not see (the provider's framing of a
message and a tool block, reminders an agent injects beside a result). It is fitted on the
steps between consecutive billed calls (`B_{k+1} − B_k` against the step's estimate and
message count; the unrecorded system prompt cancels) with a Huber regression through the
origin, a step under `NOISE` billed tokens being noise; below `MIN_STEPS` steps `b` comes
from the dated table (`calibration.FACTOR_TABLE`) and `c` is 0.

One call ahead the bill already says what a response generated: for agents whose usage records
it (`RECORDED_OUTPUT`: Codex) a step takes the previous responses' visible output at the
recorded `output` − `reasoning` and their reasoning as recorded, and `f` prices (and is fitted
on) the rest. Context the agent sends that the transcript does not show is counted into the
steps where an observed release is known to send it (`todo_reminders`), never into an anchor.

A per-content-class `f` (separate `b` for code, prose, JSON, white space, non-Latin text) was
measured on the shared transcripts and not kept: see README "The token model".

Context the transcript does not show (a screenshot, a nested `CLAUDE.md`) sits in the bill of
every call after the step that brought it, hence in every anchor's offset `B_j − f(R_j)`; in
the agent's prompt it lived with the messages of that step. A step billed `UNSEEN_MIN` or more
beyond the final fit's price of its visible messages is recorded as unseen context carried by
its last message (`TokenModel.unseen`), and a view that no longer holds that message (a
compaction's summary replaced it) is priced without it (`real(dropped_before=)`).

One step ahead: per billed call `i` after the first, `real_raw_predicted = B_{i−1} +
f_{<i}(R_i) − f_{<i}(R_{i−1})` with `f_{<i}` fitted only on the steps before `i` (refitted
while the steps grow by 5 %, so a session costs O(n log n) fits, each one fitted on earlier
steps only). `accuracy` is its level error and its step error over steps ≥ `BIG_STEP`.

Stages read the model through `compared(ctx, tokens, messages, call)`: the one function that
gives "the compared figure of a view at call i" (SPEC-agents §2.5.0.10).
"""

from __future__ import annotations

import math
import statistics
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .calibration import FACTOR_TABLE, CallEstimate, percentile
from .eras import parse_version

NOISE = 200  # billed tokens: a smaller step is noise
# Billed tokens a step holds beyond what the fitted model prices its messages at before they
# count as context the transcript does not show, carried by the step's last message
# (`TokenModel.unseen`): well above the model's error on a step, and the calibration's flag.
UNSEEN_MIN = 500
MIN_STEPS = 5
BIG_STEP = 1000  # step error is measured over steps at least this big
REFIT_GROWTH = 1.05
HUBER_K = 1.345
HUBER_ITERATIONS = 20

# Pooled priors (method `calibrated`): agent format → provider family → counter → (a, b,
# error), measured 2026-12 on the shared real transcripts (SPEC §11): `b` the dated table's
# factor, `a` the median over every billed call of the agent's sessions of `bill − b ·
# estimate`, `error` the median relative error when each session is predicted from the
# others' calls (leave one session out; p90: Claude Code 43 %, Codex 58 % in cl100k_base,
# 57 % in o200k_base). Rough: the unrecorded system prompt differs between releases and
# setups (README "The token model").
PRIORS: dict[str, dict[str, dict[str, tuple[float, float, float]]]] = {
    "claude-code": {"anthropic": {"cl100k_base": (18_563.0, 1.22, 0.204),
                                  "o200k_base": (18_566.0, 1.22, 0.202)}},
    "codex": {"openai": {"cl100k_base": (3_603.0, 1.00, 0.184),
                         "o200k_base": (3_736.0, 1.00, 0.182)}},
}
# Agents whose transcripts record each response's output tokens as billed: one call ahead,
# what a response generated enters the next prompt at its recorded `output` − `reasoning`
# instead of the tokenizer model's price (README "The token model").
RECORDED_OUTPUT = frozenset({"codex"})
# The first Claude Code release observed not to bill a repeated TodoWrite list: on 1.0.17 a
# TodoWrite step billed 225–371 tokens more than its text (17 steps), on 1.0.98 40–179 (22),
# on 1.0.108 68–244 (5), as much as other steps' framing [O public Claude Code transcripts:
# shared/transcripts/claude-code-jsonl and claude-code-viewer's 1.0.98 sample; X the switch
# sits at the first release seen without it].
TODO_REMINDERS_BEFORE = (1, 0, 98)
# A fitted tokenizer factor further than this from the dated table's, either way, fits
# something other than the tokenizer (a step of unseen context with few steps beside it: on a
# 2.0.26 session `b` = 2.9, c = −99 after one screenshot the transcript does not hold), so
# the fit falls back: `b` alone, else the table (README "The token model").
B_SPREAD = 1.25


# Agents whose tool results show a file's lines numbered (Claude Code's Read and its edits'
# snippets: `calibration.NUMBERED_LINE`) and whose provider's tokenizer prices those prefixes
# at about ctxsim's count of them, not at `b` times it: on the shared Claude Code transcripts
# (1.0.17–2.1.14) a Read step of at least 1,000 tokens billed 2.9–5.0 tokens a line for the
# prefix (median 3.8) where cl100k_base counts 4.1 and the fitted line priced 4.1–4.9 [O;
# README "The token model"]. The fit and the one-step prediction take them at their count
# and fit `b` on the rest.
NUMBERED_AT_COUNT = frozenset({"claude-code"})


def estimate_options(agent: str | None, session: Mapping[str, Any]) -> dict[str, bool]:
    """What `calibration.call_estimates` counts apart for the agent that wrote the session
    (its `meta`): repeated TodoWrite lists (`todo_reminders`), line-number prefixes
    (`NUMBERED_AT_COUNT`)."""
    return {"reminders": todo_reminders(agent, session),
            "line_numbers": agent in NUMBERED_AT_COUNT}


def todo_reminders(agent: str | None, session: Mapping[str, Any]) -> bool:
    """Whether the agent that wrote the session (its `meta`) repeats each TodoWrite list in
    a reminder the transcript does not record (`calibration.call_estimates(reminders=…)`)."""
    parsed = parse_version(session.get("version"))
    return agent == "claude-code" and parsed is not None and parsed < TODO_REMINDERS_BEFORE


@dataclass(frozen=True)
class Tokenizer:
    """f(S) = b · estimate + c · messages."""

    b: float
    c: float = 0.0
    method: str = "table"  # huber | table
    steps_used: int = 0

    def f(self, estimate: float, messages: float) -> float:
        return self.b * estimate + self.c * messages

    def as_json(self) -> dict[str, Any]:
        return {"b": self.b, "c": self.c, "method": self.method, "steps_used": self.steps_used}


def table_factor(counter: str, provider: str | None) -> float:
    table = FACTOR_TABLE.get(counter)
    if table is None:
        return 1.0
    return table.get(provider or "", table["openai"])


Step = tuple[float, float, float]  # (estimate step, message step, billed step)


def fit_steps(steps: Sequence[Step], table_b: float,
              start: tuple[float, float] | None = None) -> Tokenizer:
    """The tokenizer model fitted on steps (noise left out); the table below MIN_STEPS.

    Invariant: `b` stays within the table's factor ÷ or × `B_SPREAD` (a fit outside it, e.g.
    from steps that are mostly hidden context, falls back to `b` alone, then to the table)."""
    used = [s for s in steps if abs(s[2]) >= NOISE]
    if len(used) < MIN_STEPS:
        return Tokenizer(table_b, 0.0, "table", len(used))
    low, high = table_b / B_SPREAD, table_b * B_SPREAD
    b, c = _huber(used, start)
    if not low <= b <= high:
        b, c = _huber([(x, 0.0, y) for x, _, y in used], None)[0], 0.0
        if not low <= b <= high:
            return Tokenizer(table_b, 0.0, "table", len(used))
    return Tokenizer(b, c, "huber", len(used))


def _huber(steps: Sequence[Step], start: tuple[float, float] | None) -> tuple[float, float]:
    """Huber regression y ≈ b·x + c·n through the origin (IRLS, MAD scale)."""
    w = [1.0] * len(steps)
    b, c = start if start is not None else (0.0, 0.0)
    for iteration in range(HUBER_ITERATIONS):
        if iteration or start is None:
            sxx = sxn = snn = sxy = sny = 0.0
            for (x, n, y), wi in zip(steps, w, strict=True):
                sxx += wi * x * x
                sxn += wi * x * n
                snn += wi * n * n
                sxy += wi * x * y
                sny += wi * n * y
            det = sxx * snn - sxn * sxn
            if abs(det) > 1e-9 * max(1.0, sxx * snn):
                nb, nc = (sxy * snn - sny * sxn) / det, (sny * sxx - sxy * sxn) / det
            else:  # the message counts add nothing the estimates do not
                nb, nc = (sxy / sxx if sxx else 0.0), 0.0
            if iteration and abs(nb - b) < 1e-6 and abs(nc - c) < 1e-4:
                return nb, nc
            b, c = nb, nc
        residuals = [abs(y - b * x - c * n) for x, n, y in steps]
        scale = statistics.median(residuals) / 0.6745 or 1.0
        w = [1.0 if r <= HUBER_K * scale else HUBER_K * scale / r for r in residuals]
    return b, c


@dataclass(frozen=True)
class Anchor:
    bill: int
    estimate: int
    messages: int
    reasoning: int = 0  # the reasoning sent back in the anchor's prompt (in its bill)
    # The transcript's messages the anchor's prompt held: origins since ≤ o < until.
    since: int = 0
    until: int = 0


@dataclass
class TokenModel:
    """One session's token model for one counter (see the module docstring)."""

    method: str  # anchored | calibrated | counter
    counter: str
    tokenizer: Tokenizer
    # anchored: call index → the anchor it reads (the latest billed call ≤ it).
    anchors: list[Anchor | None] = field(default_factory=list)
    # calibrated: the prior's offset.
    a: float = 0.0
    predicted: dict[int, int] = field(default_factory=dict)
    accuracy: dict[str, Any] | None = None
    by_response: dict[int, int] = field(default_factory=dict)  # response index → call index
    prior_error: float | None = None
    # The anchors as a stage measures a prompt (`full_prompt`: images as base64/4, reasoning
    # left out); None: `anchors` serve both.
    stage_anchors: list[Anchor | None] | None = None
    # Context the transcript does not show, in billed tokens, by the origin of the message
    # whose step brought it (ascending): what a step billed beyond `UNSEEN_MIN` over the
    # fitted price of its messages, injections recorded apart included. It sits in every
    # anchor's bill after it, and leaves the prompt with its message (`real(dropped_before=)`).
    unseen: tuple[tuple[int, float], ...] = ()
    _unseen_index: tuple[list[int], list[float]] | None = field(default=None, repr=False)

    def real(self, estimate: int, messages: int, call: int, *, stage: bool = False,
             reasoning: int | None = None, dropped_before: int | None = None) -> int:
        """`real(S, call)` of a prompt whose counter estimate and length are given. `stage`:
        the estimate is a stage's (`full_prompt`: images counted as base64/4, no reasoning),
        which reads the anchors measured the same way (`stage_anchors`); `reasoning`, when
        given, is the reasoning the prompt still sends back (else: the anchor's);
        `dropped_before`: the prompt no longer holds the transcript's messages before this
        origin (a compaction's summary replaced them), so neither the unseen context they
        brought (`unseen`)."""
        if self.method == "anchored":
            anchors = self.stage_anchors if stage and self.stage_anchors else self.anchors
            anchor = anchors[min(max(call, 0), len(anchors) - 1)]
            if anchor is not None:
                f = self.tokenizer.f
                carried = 0 if reasoning is None else reasoning - anchor.reasoning
                gone = 0.0
                if dropped_before is not None and self.unseen:
                    gone = self.unseen_between(anchor.since, min(dropped_before, anchor.until))
                return max(0, round(anchor.bill + f(estimate + carried, messages)
                                    - f(anchor.estimate, anchor.messages) - gone))
        if self.method == "calibrated":
            return max(0, round(self.a + self.tokenizer.b * estimate))
        return estimate

    def unseen_between(self, low: int, high: int) -> float:
        """The unseen context brought by the messages of origins low ≤ o < high."""
        if high <= low:
            return 0.0
        if self._unseen_index is None:
            sums = [0.0]
            for _, tokens in self.unseen:
                sums.append(sums[-1] + tokens)
            self._unseen_index = ([o for o, _ in self.unseen], sums)
        origins, sums = self._unseen_index
        return sums[bisect_left(origins, high)] - sums[bisect_left(origins, low)]

    def call_of(self, response_index: int | None, default: int) -> int:
        """The call answered by the raw message at `response_index` (a message's `origin`)."""
        if response_index is None:
            return default
        return self.by_response.get(response_index, default)

    def as_json(self) -> dict[str, Any]:
        """The trace's top-level `token_model` (SPEC §11)."""
        tokenizer = {"counter": self.counter, **self.tokenizer.as_json()}
        if self.method == "calibrated":
            tokenizer.update(a=self.a, prior_error=self.prior_error)
        return {"method": self.method, "tokenizer": tokenizer,
                "steps_used": self.tokenizer.steps_used, "accuracy": self.accuracy}


def build(points: Sequence[CallEstimate], counter: str, provider: str | None = None,
          agent: str | None = None) -> TokenModel:
    """The session's token model from its calls (`calibration.call_estimates`)."""
    table_b = table_factor(counter, provider)
    billed = [p for p in points if p.recorded is not None and p.recorded > 0]
    by_response = {p.response_input_index: p.call_index for p in points
                   if p.response_input_index is not None}
    if not billed:
        prior = PRIORS.get(agent or "", {}).get(provider or "", {}).get(counter)
        if prior is not None:
            a, b, error = prior
            return TokenModel("calibrated", counter, Tokenizer(b), a=a, prior_error=error,
                              by_response=by_response)
        return TokenModel("counter", counter, Tokenizer(1.0), by_response=by_response)
    steps: list[Step] = []
    visible: list[tuple[int, Step]] = []  # (the step's last message, its step without hidden)
    predicted: dict[int, int] = {}
    tokenizer = Tokenizer(table_b)
    fitted_at = usable = 0
    known = agent in RECORDED_OUTPUT
    for prev, cur in zip(billed, billed[1:], strict=False):
        if usable >= max(MIN_STEPS, fitted_at * REFIT_GROWTH):
            start = (tokenizer.b, tokenizer.c) if tokenizer.method == "huber" else None
            tokenizer = fit_steps(steps, table_b, start)
            fitted_at = usable
        assert prev.recorded is not None and cur.recorded is not None
        # What the previous responses added that their bill already priced (`known`) is
        # taken as billed; the tokenizer model prices the rest.
        sent_back = cur.reasoning - prev.reasoning
        billed_out = cur.output_recorded - prev.output_recorded + sent_back if known else 0
        counted_out = cur.output_estimate - prev.output_estimate + sent_back if known else 0
        # Line-number prefixes at their count (`NUMBERED_AT_COUNT`; 0 for other agents).
        numbered = cur.numbered - prev.numbered
        x = (cur.agent_estimate - prev.agent_estimate - counted_out + cur.hidden - prev.hidden
             - numbered)
        n = cur.agent_messages - prev.agent_messages
        predicted[cur.call_index] = round(prev.recorded + billed_out + numbered
                                          + tokenizer.f(x, n))
        steps.append((x, n, cur.recorded - prev.recorded - billed_out - numbered))
        usable += abs(steps[-1][2]) >= NOISE
        if cur.agent_from == prev.agent_from and cur.response_input_index:
            visible.append((cur.response_input_index - 1,
                            (x - cur.hidden + prev.hidden, n, steps[-1][2])))
    final = fit_steps(steps, table_b)
    unseen = tuple((origin, y - final.f(x, n)) for origin, (x, n, y) in visible
                   if y - final.f(x, n) >= UNSEEN_MIN)
    return TokenModel("anchored", counter, final, anchors_of(points), predicted=predicted,
                      accuracy=accuracy(billed, predicted), by_response=by_response,
                      unseen=unseen)


def anchors_of(points: Sequence[CallEstimate], reasoning: bool = True) -> list[Anchor | None]:
    """Per call, the anchor it reads: the latest billed call ≤ it, else the first billed.
    Without `reasoning` the anchors' estimates leave out the reasoning sent back, as a
    stage's `full_prompt` does (the bill still holds it)."""
    def anchor(p: CallEstimate) -> Anchor:
        return Anchor(p.recorded or 0, p.agent_estimate - (0 if reasoning else p.reasoning),
                      p.agent_messages, p.reasoning, p.agent_from,
                      p.response_input_index or 0)

    billed = [p for p in points if p.recorded is not None and p.recorded > 0]
    if not billed:
        return [None] * len(points)
    latest = anchor(billed[0])
    anchors: list[Anchor | None] = []
    for p in points:
        if p.recorded is not None and p.recorded > 0:
            latest = anchor(p)
        anchors.append(latest)
    return anchors


def accuracy(billed: Sequence[CallEstimate], predicted: Mapping[int, int]) -> dict[str, Any]:
    """One-step-ahead errors: level |pred − B_i| / B_i and, over steps of at least BIG_STEP
    tokens, |pred − B_i| / (B_i − B_{i−1})."""
    level: list[float] = []
    step: list[float] = []
    for prev, cur in zip(billed, billed[1:], strict=False):
        pred = predicted.get(cur.call_index)
        if pred is None or not cur.recorded or prev.recorded is None:
            continue
        level.append(abs(pred - cur.recorded) / cur.recorded)
        grew = cur.recorded - prev.recorded
        if grew >= BIG_STEP:
            step.append(abs(pred - cur.recorded) / grew)

    def rounded(values: list[float], share: float) -> float | None:
        value = percentile(values, share)
        return None if math.isnan(value) else round(value, 5)

    return {"one_step_median": rounded(level, 0.5), "one_step_p90": rounded(level, 0.9),
            "step_median": rounded(step, 0.5), "step_p90": rounded(step, 0.9),
            "calls": len(level), "steps": len(step)}


def call_figures(model: TokenModel | None, call: Any) -> dict[str, int | None]:
    """A replay call's `tokens.real_raw`, `real_sent` and `real_raw_predicted` (SPEC §11);
    `call` is a `replay.CallResult`. Without a model (a replay that turned it off) all null."""
    if model is None:
        return {"real_raw": None, "real_sent": None, "real_raw_predicted": None}
    i = call.call_index
    gone = kept_from(call.sent) if model.unseen else None
    return {"real_raw": model.real(call.raw_tokens, len(call.raw_history), i),
            "real_sent": model.real(call.sent_tokens, len(call.sent), i, dropped_before=gone),
            "real_raw_predicted": model.predicted.get(i)}


# --- what stages call ----------------------------------------------------------------------


def compared(ctx: Any, tokens: int, messages: int, call: int | None = None,
             source: str = "anchored", reasoning: int | None = None,
             dropped_before: int | None = None, view: Sequence[Any] | None = None) -> int:
    """The compared figure of a view at call `call` (default: the call being made):
    `tokens` is the view's full prompt under the profile's counter (`full_prompt(view,
    ctx)`), `messages` its length, `reasoning` (when the stage knows it differs from the
    transcript's) the reasoning tokens the view still sends back (SPEC §11: a compaction
    drops the turn's reasoning items), `dropped_before` (a compacted view) the origin before
    which the transcript's messages, and the unseen context they brought, are gone (else,
    given the `view`, `kept_from(view)`). With `source` "anchored" and a session that
    records usage it is SPEC §11's `real(V', call)`, else `tokens` (so `counter` and
    sessions without usage compare ctxsim's own count, exactly as before).

    Every stage whose threshold models a provider token limit compares this figure
    (SPEC-agents §2.5.0.10)."""
    model: TokenModel | None = getattr(ctx, "token_model", None)
    if source != "anchored" or model is None or model.method != "anchored":
        return tokens
    if dropped_before is None and view is not None and model.unseen:
        dropped_before = kept_from(view)
    return model.real(tokens, messages, ctx.call_index if call is None else call, stage=True,
                      reasoning=reasoning, dropped_before=dropped_before)


def kept_from(view: Sequence[Any]) -> int | None:
    """The first origin among the transcript's messages a view holds past its leading system
    block and any summary standing in for what came before: every transcript message before
    it is gone from the view (whatever the view's shape, since it is the smallest held)."""
    for m in view:
        if m.role != "system" and m.origin is not None:
            return m.origin
    return None


def dropped_before(history: Sequence[Any], anchor: int | None) -> int | None:
    """For a view compacted up to `history[anchor]` (the last message its summary covers),
    the origin before which the transcript's messages are gone (`compared(dropped_before=)`);
    None before any compaction or when that message is not the transcript's."""
    if anchor is None or not 0 <= anchor < len(history):
        return None
    origin = history[anchor].origin
    return None if origin is None else origin + 1


def step_call(ctx: Any, history: Sequence[Any], end: int, j: int) -> int:
    """The call index of a fold's step (SPEC-agents §2.5.0.4) that saw `history[:end]`: the
    call answered by `history[end]` (its origin in the transcript) for a past step, the
    call being made for the current one; `j` when neither tells."""
    if end >= len(history):
        return ctx.call_index
    model: TokenModel | None = getattr(ctx, "token_model", None)
    if model is None:
        return j
    return model.call_of(history[end].origin, j)


def unit_of(ctx: Any, source: str) -> str:
    """The unit a stage's `tokens_before` is in, for its reports and notes: "provider"
    (anchored on the session's bill), "usage" (the agent's own recorded-usage measure) or
    "counter" (ctxsim's count)."""
    if source == "usage":
        return "usage"
    model: TokenModel | None = getattr(ctx, "token_model", None)
    anchored = source == "anchored" and model is not None and model.method == "anchored"
    return "provider" if anchored else "counter"


def after_fields(ctx: Any, unit: str, tokens_after: int, messages: int,
                 dropped_before: int | None = None) -> dict[str, int]:
    """`tokens_after_compared`, for a compaction report whose `tokens_before` is in the
    provider's tokens: the view it left (`tokens_after`, ctxsim's count of `full_prompt(V)` as
    SPEC-agents defines it, `messages` long) in that same unit, so a note's "before → after"
    is one unit (SPEC §11). Nothing when `tokens_before` is a count already."""
    if unit != "provider":
        return {}
    return {"tokens_after_compared": compared(ctx, tokens_after, messages,
                                              dropped_before=dropped_before)}


def shown_after(report: Mapping[str, Any]) -> Any:
    """The "after" figure a note shows: in the unit of the report's `tokens_before`."""
    return report.get("tokens_after_compared", report.get("tokens_after"))


# The report keys that say in which unit a stage compared, not what it decided: a replay
# with the model on and one with it off differ only by these where the bill is the count.
UNIT_KEYS = frozenset({"token_unit", "tokens_after_compared"})

UNIT_WORDS = {"provider": "the provider's tokens, anchored on the recorded bill",
              "usage": "the last recorded usage plus an estimate of what followed",
              "counter": "ctxsim's own count"}


def unit_words(reports: Sequence[Mapping[str, Any]]) -> str:
    """" (in …)" naming the unit of a replay's reports, for a stage's notes; "" when the
    reports do not say."""
    unit = next((r.get("token_unit") for r in reports if r.get("token_unit")), None)
    return f" ({UNIT_WORDS[unit]})" if unit in UNIT_WORDS else ""

