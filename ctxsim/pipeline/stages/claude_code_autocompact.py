"""Claude Code's automatic compaction (SPEC-agents §2.5.3), an outgoing stage with the fold.

When the conversation reaches the threshold (the effective window minus a safety buffer, or a
lower `CLAUDE_AUTOCOMPACT_PCT_OVERRIDE`), the whole conversation is replaced by one user
message holding a summary. Recorded compactions (`compact_boundary` + `isCompactSummary`) are
replayed with their own summary; predicted ones get a placeholder of a configurable size.
The threshold formula follows a maintainer's statement and users' readings of the released
CLI (anthropics/claude-code#86863, #12004, #31806) over the docs' "approximately 95%".
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agent_settings import ClaudeEnv, claude_env_effective
from ..agents_common import (
    COMPACTION_EVENTS,
    assistant_positions,
    cc_rough,
    compaction_event,
    fold,
    full_prompt,
    is_recorded_summary,
    leading_system_len,
    marker_positions,
    placeholder_message,
    placeholder_text,
    text_of,
    u16len,
)
from ..history import frozen
from ..messages import Message
from ..token_model import (
    after_fields,
    compared,
    dropped_before,
    shown_after,
    step_call,
    unit_of,
    unit_words,
)
from . import ReplayFacts, StageContext, StageResult, view_result

STAGE = "claude_code_autocompact"
SOURCE = "claude-code"

V2_OPEN = ("This session is being continued from a previous conversation that ran out of "
           "context. The summary below covers the earlier portion of the conversation.\n\n")
V2_CLOSE = ("\nContinue the conversation from where it left off without asking the user any "
            "further questions. Resume directly \u2014 do not acknowledge the summary, do not "
            "recap what was happening, do not preface with \"I'll continue\" or similar. Pick "
            "up the last task as if the break never happened.")
V1_OPEN = ("This session is being continued from a previous conversation that ran out of "
           "context. The conversation is summarized below:\n")
V1_CLOSE = ("\nPlease continue the conversation from where we left it off without asking the "
            "user any further questions. Continue with the last task that you were asked to "
            "work on.")

# (prefix, window, max output), longest prefix first; ids lose a trailing -YYYYMMDD first.
MODEL_TABLE = (
    ("claude-opus-4-5", 200_000, 64_000),
    ("claude-opus-4-6", 200_000, 64_000),
    ("claude-opus-4-7", 200_000, 64_000),
    ("claude-opus-4-1", 200_000, 32_000),
    ("claude-3-5-haiku", 200_000, 8_192),
    ("claude-opus-4", 200_000, 32_000),
    ("claude-", 200_000, 64_000),
)
UNKNOWN_MODEL = (200_000, 32_000)
ONE_M = "[1m]"
ONE_M_WINDOW = 1_000_000


def model_limits(model: str | None) -> tuple[int, int]:
    """(window, max output) of a model id by ctxsim's compiled table (§2.5.3)."""
    if not model:
        return UNKNOWN_MODEL
    one_m = ONE_M in model
    base = re.sub(r"-\d{8}$", "", model.replace(ONE_M, ""))
    window, max_out = next(((w, o) for prefix, w, o in MODEL_TABLE if base.startswith(prefix)),
                           UNKNOWN_MODEL)
    return (ONE_M_WINDOW if one_m else window), max_out


@dataclass(frozen=True)
class Threshold:
    effective_window: int
    threshold: int
    enabled: bool


def threshold_of(params: Mapping[str, Any], session: Mapping[str, Any],
                 env: ClaudeEnv) -> Threshold:
    """E = W − min(max output, reserve); T = E − buffer, or the lower PCT override.

    W is the model table's window unless the session billed a larger prompt: Claude's models
    offer 200,000 tokens or, on request, 1,000,000 (`[1m]`, which the transcript's model id
    does not show), so a bill above the table's window means the 1M one (public 2.1.81
    sessions of claude-opus-4-6 billed 210,000–220,000 tokens and never compacted)."""
    window, max_out = model_limits(params.get("cc_model") or session.get("model"))
    peak = (session.get("recorded_totals") or {}).get("peak_input")
    if isinstance(peak, int) and peak > window:
        window = ONE_M_WINDOW
    w = params.get("cc_context_window") or window
    if env.auto_compact_window is not None:
        w = min(w, env.auto_compact_window)
    max_out = params.get("cc_max_output_tokens") or max_out
    e = w - min(max_out, params.get("cc_summary_reserve_tokens", 20000))
    t0 = e - params.get("cc_autocompact_buffer_tokens", 13000)
    t = t0
    if env.pct_override is not None:
        t = min(math.floor(e * (env.pct_override / 100)), t0)
    return Threshold(e, t, not (env.disable_compact or env.disable_auto_compact))


@dataclass(frozen=True)
class State:
    anchor: int | None = None
    summary: Message | None = None
    kept: tuple[Message, ...] = ()
    count: int = 0


def view(p: Sequence[Message], s: State) -> list[Message]:
    """V(P, s): the leading system block, the summary and kept messages, then what followed
    the anchor, recorded summaries left out."""
    lead = leading_system_len(p)
    out = list(p[:lead])
    start = lead
    if s.anchor is not None and s.summary is not None:
        out.append(s.summary)
        out.extend(s.kept)
        start = s.anchor + 1
    out.extend(m for m in p[start:] if not is_recorded_summary(m))
    return out


def rough(m: Message) -> int:
    return cc_rough(u16len(text_of(m))) + sum(cc_rough(u16len(c.name + c.arguments))
                                              for c in m.tool_calls)


def usage_tokens(v: Sequence[Message], after: int) -> int:
    """Last recorded usage after the summary (position `after` in the view) plus a rough
    estimate of what followed; without one, the rough estimate of the whole conversation."""
    for k in range(len(v) - 1, after, -1):
        m = v[k]
        usage = m.meta.get("usage") if m.role == "assistant" else None
        if isinstance(usage, Mapping):
            total = sum(_count(usage.get(f)) for f in (
                "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                "output_tokens"))
            return total + sum(rough(x) for x in v[k + 1:])
    return sum(rough(m) for m in v if m.role != "system")


def _count(value: Any) -> int:
    """A usage field as recorded: an integer, else 0 (missing, null or malformed)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def summary_message(text: str, template: str) -> Message:
    if template == "v1":
        return placeholder_message("user", V1_OPEN + text + V1_CLOSE)
    return placeholder_message("user", V2_OPEN + text + V2_CLOSE)


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Compact the outgoing history as Claude Code would, from the call schedule.

    Invariant: the output is the leading system block, then either the history unchanged
    (recorded summaries left out) or one summary (recorded or placeholder) followed by what
    came after the compaction point; it never splits off a message's part.
    """
    p = ctx.params
    env = claude_env_effective(p.get("claude_env") or {})
    th = threshold_of(p, ctx.session, env)
    mode = p.get("cc_autocompact_mode", "predict")
    h = frozen(history)
    starts = assistant_positions(h, ctx)
    by_call: dict[int, list[tuple[int, Mapping[str, Any]]]] = {}
    summaries: list[int] = []
    for i in marker_positions(h, ctx, "compaction"):
        marker = h[i].meta["compaction"]
        if isinstance(marker, Mapping) and marker.get("source", SOURCE) == SOURCE:
            by_call.setdefault(bisect_left(starts, i), []).append((i, marker))
            if marker.get("kind") == "summary":
                summaries.append(i)

    source = p.get("cc_token_source", "anchored")

    def measure(v: Sequence[Message], s: State, call: int, p: Sequence[Message]) -> int:
        if source == "usage":
            lead = leading_system_len(v)
            return usage_tokens(v, lead if s.anchor is not None else lead - 1)
        return compared(ctx, full_prompt(v, ctx), len(v), call, source,
                        dropped_before=dropped_before(p, s.anchor))

    def step(s: State, h: Sequence[Message], end: int,
             j: int) -> tuple[State, list[Message], dict[str, Any]]:
        prefix = h if end == len(h) else h[:end]  # the whole history is not copied
        before = view(prefix, s)
        tokens = measure(before, s, step_call(ctx, h, end, j), prefix)
        conversation = sum(1 for m in before if m.role != "system")
        fires = th.enabled and conversation > 0 and tokens >= th.threshold
        info: dict[str, Any] = {"tokens_before": tokens, "predicted": fires, "events": [],
                                "recorded": False, "compacted": False, "trigger": None,
                                "summary_source": None, "recorded_pre_tokens": None}
        applied = False
        for i, marker in by_call.get(j, ()):
            if i >= end:
                continue
            info["recorded"] = True
            info["recorded_pre_tokens"] = marker.get("pre_tokens")
            manual = marker.get("trigger") == "manual"
            if manual or mode == "recorded" or (mode == "predict" and fires):
                kind = marker.get("kind")
                if kind == "summary":
                    summary, source = prefix[i], "recorded"
                else:
                    # A boundary without its summary (never seen in real transcripts): a
                    # placeholder stands in; the anchor is the marked message, as for a
                    # summary (SPEC-agents §2.5.3 step 1).
                    text = placeholder_text(STAGE, conversation, tokens, j,
                                            p.get("summary_placeholder_tokens", 2000),
                                            ctx.counter)
                    summary = summary_message(text, p.get("cc_summary_template", "v2"))
                    source = "placeholder"
                anchor = i
                preserved = set(marker.get("preserved_uuids") or ())
                kept = tuple(m for m in prefix if preserved and m.meta.get("uuid") in preserved)
                s = State(anchor, summary, kept, s.count + 1)
                applied = True
                info.update(compacted=True, summary_source=source,
                            trigger="manual_recorded" if manual else "auto_recorded")
                event = ("recorded" if manual or mode == "recorded"
                         else "predicted_and_recorded")
                info["events"].append((event, info["trigger"], source))
            else:
                info["events"].append(("recorded_not_predicted",
                                       "manual_recorded" if manual else "auto_recorded", None))
        if not applied and mode == "predict" and fires:
            text = placeholder_text(STAGE, conversation, tokens, j,
                                    p.get("summary_placeholder_tokens", 2000), ctx.counter)
            s = State(len(prefix) - 1, summary_message(text, p.get("cc_summary_template", "v2")),
                      (), s.count + 1)
            info.update(compacted=True, trigger="auto_predicted", summary_source="placeholder")
            info["events"].append(("predicted", "auto_predicted", "placeholder"))
        return s, view(prefix, s), info

    result = fold(h, ctx, State(), step)
    info, out = result.info, result.view
    after = full_prompt(out, ctx)
    in_view = {id(m) for m in out} if summaries else set()
    dropped = sum(1 for i in summaries if id(h[i]) not in in_view)
    report: dict[str, Any] = {
        "compacted": info["compacted"], "trigger": info["trigger"],
        "recorded": info["recorded"], "predicted": info["predicted"],
        "threshold": th.threshold, "effective_window": th.effective_window,
        "tokens_before": info["tokens_before"], "tokens_after": after,
        "summary_source": info["summary_source"],
        "recorded_pre_tokens": info["recorded_pre_tokens"],
        "compactions_so_far": result.state.count, "dropped_recorded_summaries": dropped,
        "enabled": th.enabled, "token_source": source, "token_unit": unit_of(ctx, source),
        **after_fields(ctx, unit_of(ctx, source), after, len(out),
                       dropped_before(h, result.state.anchor)),
        "env_effective": {
            "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": env.pct_override,
            "CLAUDE_CODE_AUTO_COMPACT_WINDOW": env.auto_compact_window,
            "DISABLE_AUTO_COMPACT": env.disable_auto_compact,
            "DISABLE_COMPACT": env.disable_compact,
        },
        COMPACTION_EVENTS: [
            compaction_event(STAGE, kind, trigger, source, info["tokens_before"],
                             after if kind != "recorded_not_predicted" else None)
            for kind, trigger, source in info["events"]
        ],
    }
    return view_result(h, out, report)


# --- what a report means ----------------------------------------------------------------------


def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("compacted") else 0


def describe(report: Mapping[str, Any]) -> str:
    recorded = report.get("recorded_pre_tokens")
    # The count comes from the transcript: only an integer is shown as one.
    was = (f" (Claude Code compacted here: {recorded:,} tokens before)"
           if isinstance(recorded, int) and not isinstance(recorded, bool) else "")
    if report.get("compacted"):
        return (f"Compacted ({report.get('trigger', '').replace('_', ' ')}, "
                f"{report.get('summary_source')} summary): {report.get('tokens_before')} → "
                f"{shown_after(report)} tokens{was}.")
    if not report.get("enabled"):
        return "Auto-compact disabled (DISABLE_AUTO_COMPACT / DISABLE_COMPACT)."
    return (f"{report.get('tokens_before')} tokens, below the threshold "
            f"{report.get('threshold')}{was}.")


def quiet_note(facts: ReplayFacts) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    thresholds = [r.get("threshold") for r in facts.reports if r.get("threshold") is not None]
    peak = max((r.get("tokens_before") or 0 for r in facts.reports), default=0)
    if not thresholds:
        return None
    return (f"Claude Code auto-compact never fired: the conversation peaked at {peak:,} tokens"
            f"{unit_words(facts.reports)}, below the threshold of {thresholds[-1]:,} tokens "
            "(effective window minus the safety "
            "buffer; the 20,000-token summary reserve is ctxsim's default, not documented by "
            "Anthropic).")


def measures_billed(values: Mapping[str, Any]) -> bool:
    """Token source `usage`: the stage measures in the provider's recorded tokens, which a
    calibration must not convert again."""
    return values.get("cc_token_source") == "usage"


def limit_line(values: Mapping[str, Any]) -> tuple[str, int | None]:
    """The chart's line: the threshold for the configured model (the session's own model is
    not known here, so an unset `cc_model` means the 200K table row)."""
    env = claude_env_effective(values.get("claude_env") or {})
    th = threshold_of(values, {}, env)
    return "auto-compact threshold", th.threshold if th.enabled else None
