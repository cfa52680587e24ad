"""What the OpenCode stages share (SPEC-agents-2 §6): its token estimate, its model limits,
and which messages are its compaction records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..agents_common import u16len
from ..messages import Message
from ._agents2 import text

SOURCE = "opencode"
CLEARED = "[Old tool result content cleared]"
COMPACTION_PROMPT = "What did we do so far?"
# (model id part, limit.context, limit.input, limit.output) as models.dev lists them [X].
MODELS = (("claude", 200_000, None, 32_000), ("gpt-5", 400_000, 272_000, 128_000),
          ("gpt-4.1", 1_047_576, None, 32_768), ("gemini", 1_048_576, None, 65_536))
DEFAULT_OUTPUT = 32_000


def estimate(s: str) -> int:
    """Token.estimate: `Math.round(length / 4)` on UTF-16 units (halves round up)."""
    return (u16len(s) + 2) // 4


def limits(params: Mapping[str, Any], session: Mapping[str, Any]
           ) -> tuple[int, int | None, int]:
    """(limit.context, limit.input, max output) from the parameters, else the model."""
    model = str(session.get("model") or "").lower()
    row = next((r for r in MODELS if r[0] in model), None)
    context = params.get("opencode_context_limit") or (row[1] if row else 200_000)
    input_limit = params.get("opencode_input_limit") or (row[2] if row else None)
    output = params.get("opencode_max_output") or (row[3] if row else DEFAULT_OUTPUT)
    return int(context), input_limit, int(output)


def usable(params: Mapping[str, Any], session: Mapping[str, Any]) -> int | None:
    """isOverflow's usable size; None: never (no context limit, or auto-compaction off)."""
    if params.get("opencode_auto") is False:
        return None
    context, input_limit, output = limits(params, session)
    if context == 0:
        return None
    if input_limit:
        reserved = params.get("opencode_reserved")
        reserved = min(20_000, output) if reserved is None else reserved
        return max(0, int(input_limit) - reserved)
    return max(0, context - output)


def is_compaction_prompt(m: Message) -> bool:
    marker = m.meta.get("compaction")
    if isinstance(marker, Mapping) and marker.get("source") == SOURCE:
        return marker.get("kind") != "summary" and m.role == "user"
    return m.role == "user" and ("opencode_compaction_request" in m.meta
                                 or text(m).strip() == COMPACTION_PROMPT)
