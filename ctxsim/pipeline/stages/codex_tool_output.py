"""Codex CLI's tool-output truncation at record time (SPEC-agents §2.5.4), dispatch phase.

Codex keeps every tool output whole in its rollout but records a head+tail copy into the
history it sends: `policy × 1.2` of the model's truncation policy, in bytes or ~tokens
(⌈bytes/4⌉). Runs once per tool message, as it enters the history: the message is the last of
`history`, the latest assistant message (if any) the first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..agents_common import codex_bytes
from ..messages import Message
from . import StageContext, StageResult
from ._codex import DEFAULT_LIMIT, already_shaped, history_budget, model_row, truncate


def session_meta(ctx: StageContext) -> Mapping[str, Any]:
    """The session's `meta` (model, recorded window), empty when the replay has none."""
    return ctx.session if isinstance(ctx.session, Mapping) else {}


def resolve_policy(m: Message, ctx: StageContext) -> tuple[dict[str, Any], str]:
    """The truncation policy of one tool message and where it came from: the parameter, the
    rollout's recorded `turn_context` policy, the model table, or the table's default row;
    `tool_output_token_limit` then replaces the limit, keeping the mode."""
    p = ctx.params
    config = p.get("codex_config") or {}
    recorded = m.meta.get("codex_truncation_policy")
    if p.get("codex_truncation_policy") is not None:
        policy, source = dict(p["codex_truncation_policy"]), "param"
    elif p.get("codex_use_recorded_policy", True) and isinstance(recorded, Mapping) and \
            _is_policy(recorded):
        policy, source = {"mode": recorded["mode"], "limit": recorded["limit"]}, "recorded"
    else:
        row = model_row(config.get("model") or session_meta(ctx).get("model"))
        mode = row[0] if row else "bytes"
        policy, source = {"mode": mode, "limit": DEFAULT_LIMIT}, "model" if row else "default"
    limit = config.get("tool_output_token_limit")
    if limit is not None:
        policy["limit"] = 4 * limit if policy["mode"] == "bytes" else limit
    return policy, source


def _is_policy(value: Any) -> bool:
    return (isinstance(value, Mapping) and value.get("mode") in ("bytes", "tokens")
            and isinstance(value.get("limit"), int) and not isinstance(value.get("limit"), bool)
            and value["limit"] >= 0)


def _tool_name(history: Sequence[Message], call_id: str) -> str:
    for m in reversed(history):
        for call in m.tool_calls:
            if call.id == call_id:
                return call.name
    return ""


def run(history: Sequence[Message], ctx: StageContext) -> StageResult:
    """Truncate the entering tool message to its history budget.

    Invariant: only the content of the last message changes; errors are truncated too and
    image parts are kept; a content within the budget is returned unchanged (same object).
    """
    m = history[-1]
    policy, source = resolve_policy(m, ctx)
    budget = history_budget(policy)
    text = codex_bytes(m.content)
    # Before 0.56 the tool cut its output before the rollout recorded it (eras.py); an output
    # this release already cut to the budget stays as it is too.
    skipped = ("as_recorded" if ctx.params.get("codex_output_truncation") == "rollout"
               else "already_truncated" if already_shaped(text, budget) else None)
    after = m.content if skipped else truncate(text, budget)
    report = {
        "tool": _tool_name(history[:-1], m.tool_call_id),
        "policy": policy,
        "policy_source": source,
        "history_budget": budget,
        "bytes_before": len(m.content),
        "bytes_after": len(after),
        "truncated": not skipped and after != text,
    }
    if skipped:
        report["skipped"] = skipped
    if after == m.content:
        return StageResult(tuple(history), report, ())
    return StageResult((*history[:-1], m.with_content(after)), report, (len(history) - 1,))


# --- what the report means (registry.StageDef) ---------------------------------------------

def activity(report: Mapping[str, Any]) -> int:
    return 1 if report.get("truncated") else 0


def describe(report: Mapping[str, Any]) -> str:
    budget = report.get("history_budget") or {}
    unit = "tokens" if budget.get("mode") == "tokens" else "bytes"
    source = {"param": "the parameter", "recorded": "the rollout's turn_context",
              "model": "the model table", "default": "the default row"}.get(
        str(report.get("policy_source")), "?")
    if report.get("skipped") == "as_recorded":
        return (f"{report.get('tool') or 'Tool'} output left as the rollout recorded it "
                f"({report.get('bytes_before')} bytes): this release cut outputs before "
                "recording them.")
    if report.get("skipped") == "already_truncated":
        return (f"{report.get('tool') or 'Tool'} output already cut to {budget.get('limit')} "
                f"{unit} ({report.get('bytes_before')} bytes), left as it is.")
    if report.get("truncated"):
        return (f"{report.get('tool') or 'Tool'} output truncated to {budget.get('limit')} "
                f"{unit} (policy from {source}): {report.get('bytes_before')} → "
                f"{report.get('bytes_after')} bytes.")
    return (f"{report.get('tool') or 'Tool'} output kept whole ({report.get('bytes_before')} "
            f"bytes, within {budget.get('limit')} {unit}).")


def quiet_note(facts: Any) -> str | None:
    """Dispatch reports are not per call: the note speaks of the largest result."""
    if any(activity(r) for r in facts.reports):
        return None
    if facts.value("codex_output_truncation") == "rollout":
        return ("This Codex release cut tool outputs before the rollout recorded them, so each "
                "is sent as recorded: the largest result of this transcript is "
                f"{facts.largest_result:,} bytes.")
    policy = facts.value("codex_truncation_policy")
    config = facts.value("codex_config") or {}
    where = (f"{policy['mode']} {policy['limit']:,} × 1.2" if policy else
             "the recorded turn_context policy or the model table's (10,000 × 1.2)")
    if config.get("tool_output_token_limit") is not None:
        where += f", limit {config['tool_output_token_limit']:,} from tool_output_token_limit"
    return (f"No tool output needs truncating at {where} unless it is longer: the largest "
            f"result of this transcript is {facts.largest_result:,} bytes.")
