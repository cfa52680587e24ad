"""mini-swe-agent's observation template (SPEC-agents-2 §8), dispatch: its only context
management. mini-swe-agent sends every message every time; an output of 10,000 characters or
more is sent as a `<warning>`, the first 5,000 characters, the count elided and the last
5,000 (`model.observation_template` ≥ v2, `agent.action_observation_template` v1).

Trajectories record observations already rendered, so an output that already has the
template's tags is left as it is; a plain output (another agent's transcript replayed under
this profile) gets the long form without the `<returncode>` line, which ctxsim does not know.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message
from . import StageContext, StageResult
from ._agents2 import replace_last, text, truncation_activity

WARNING = (
    "<warning>\n"
    "The output of your last command was too long.\n"
    "Please try a different command that produces less output.\n"
    "If you're looking at a file you can try use head, tail or sed to view a smaller number "
    "of lines selectively.\n"
    "If you're using grep or find and it produced too much output, you can use a more "
    "selective search pattern.\n"
    "If you really need to see something from the full command's output, you can redirect "
    "output to a file and then search in that file.\n"
    "</warning>"
)
SHAPED = ("<returncode>", "<output_head>", "<exception>", "<warning>")


def long_form(output: str, limit: int, head: int, tail: int) -> str:
    """The template's else-branch (whitespace as Jinja's `-` markers leave it)."""
    elided = len(output) - limit
    tail_text = output[-tail:] if tail else ""
    return (f"{WARNING}<output_head>\n{output[:head]}\n</output_head>\n<elided_chars>\n"
            f"{elided} characters elided\n</elided_chars>\n<output_tail>\n{tail_text}\n"
            "</output_tail>")


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Shorten the entering observation as mini-swe-agent's template would.

    Invariant: only the last message may change; an observation already rendered by the
    template, or shorter than the limit, is returned unchanged (the same object)."""
    p = ctx.params
    m = history[-1]
    output = text(m)
    limit = p.get("mini_swe_output_limit", 10000)
    report: dict[str, Any] = {"chars_before": len(output), "chars_after": len(output),
                              "truncated": False, "already_rendered": False}
    if output.lstrip().startswith(SHAPED):
        report["already_rendered"] = True
        return StageResult(history, report, ())
    if len(output) < limit:
        return StageResult(history, report, ())
    after = long_form(output, limit, p.get("mini_swe_head_chars", 5000),
                      p.get("mini_swe_tail_chars", 5000))
    report.update(truncated=True, chars_after=len(after))
    return replace_last(history, after, report)


activity = truncation_activity


def describe(report: Mapping[str, Any]) -> str:
    if report.get("truncated"):
        return (f"Output shortened: {report['chars_before']:,} → {report['chars_after']:,} "
                "characters.")
    if report.get("already_rendered"):
        return "Observation already rendered by mini-swe-agent's template."
    return f"Output kept ({report.get('chars_before', 0):,} characters)."


def quiet_note(facts: Any) -> str | None:
    if any(activity(r) for r in facts.reports):
        return None
    return ("mini-swe-agent's observation template shortened nothing: no plain output reached "
            f"{facts.value('mini_swe_output_limit'):,} characters.")
