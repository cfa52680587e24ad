"""What a Codex model read of a shell result the rollout recorded as JSON.

Codex records a `shell` result as `{"output": …, "metadata": {"exit_code": N,
"duration_seconds": X}}`. From 0.45 (openai/codex#4718, merged 2025-10-04, the first release
after it; 0.44.0 shipped 2025-10-03) the client rewrote that JSON, just before each request,
into plain text when the freeform `apply_patch` tool was in the request
(`codex-rs/core/src/client_common.rs`, `reserialize_shell_outputs`, removed in openai/codex#22706
of 2026-05-14 once every tool answered in text):

    Exit code: N
    Wall time: X seconds
    [Total output lines: T]      ← only when the output opened with that header
    Output:
    <output>

The rollout kept the JSON, the provider billed the text [O: on the 0.58 sample billed ÷
counted is 0.83–0.88 on the JSON and 1.02–1.05 on the text; on the 0.40 samples, before the
rewrite, the JSON fits at 0.99–1.04]. So the importer makes the text the message content and
keeps the recorded JSON in `meta["recorded_output"]` for the page.

Which calls: outputs answering `shell` / `container.exec` / `apply_patch` function calls, a
`local_shell_call` or a custom `apply_patch` call, whose text parses as that JSON (anything
else stays as recorded). When the freeform tool was present [X: a rollout does not record its
tool list; ctxsim takes it as present when the session's model is a `-codex` model (their
model family declares the freeform tool) or the rollout has a custom `apply_patch` call].
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ctxsim.pipeline.eras import parse_version
from ctxsim.pipeline.messages import Message

SINCE = (0, 45, 0)
SHELL_NAMES = frozenset({"shell", "container.exec", "apply_patch", "local_shell"})
TOTAL_LINES = "Total output lines: "


def _number(value: Any) -> str:
    """A Rust `f32` printed with `{}`: shortest digits, no exponent, `3` for 3.0."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def shell_text(raw: str) -> str | None:
    """The text the model was sent for a recorded shell result; None when `raw` is not one."""
    if not raw.startswith("{"):
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not isinstance(parsed.get("output"), str):
        return None
    metadata = parsed.get("metadata")
    if not isinstance(metadata, dict):
        return None
    code, duration = metadata.get("exit_code"), metadata.get("duration_seconds")
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    if not isinstance(duration, (int, float)) or isinstance(duration, bool):
        return None
    output: str = parsed["output"]
    lines = [f"Exit code: {code}", f"Wall time: {_number(duration)} seconds"]
    if output.startswith(TOTAL_LINES):
        total, sep, rest = output[len(TOTAL_LINES):].partition("\n")
        if sep and total.isascii() and total.isdigit():
            lines.append(f"{TOTAL_LINES}{int(total)}")
            output = rest[1:] if rest.startswith("\n") else rest
    return "\n".join([*lines, "Output:", output])


def rewrote_shell_output(meta: dict[str, Any], messages: Sequence[Message]) -> bool:
    """Whether this session's release sent shell results as text (see the module docstring)."""
    parsed = parse_version(meta.get("cli_version"))
    if parsed is None or parsed < SINCE:
        return False
    models = meta.get("models") or []
    return any("codex" in str(m) for m in models) or any(
        c.type == "custom" and c.name == "apply_patch" for m in messages for c in m.tool_calls
    )


def as_sent(meta: dict[str, Any], messages: Sequence[Message]) -> tuple[Message, ...]:
    """The messages with each rewritten shell result as the model read it."""
    if not rewrote_shell_output(meta, messages):
        return tuple(messages)
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    out = []
    for m in messages:
        raw = m.content.decode("utf-8", "surrogatepass")
        text = (shell_text(raw) if m.role == "tool" and names.get(m.tool_call_id) in SHELL_NAMES
                else None)
        out.append(m if text is None else replace(
            m, content=text.encode("utf-8", "surrogatepass"),
            meta={**m.meta, "recorded_output": raw}))
    return tuple(out)
