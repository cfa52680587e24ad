"""Claude Code `attachment` records: context the CLI injects that the transcript keeps apart.

From CLI 2.1 the JSONL stores each injection (a nested `CLAUDE.md` loaded when a file under
its folder is read, an @-mentioned file, the todo list reminder, a file edited outside the
agent, a hook's additional context, a prompt queued while the agent worked, …) as its own
record, `{"type":"attachment","attachment":{"type":…, …}}`. The CLI wraps each in a
`<system-reminder>` when it builds the request; that wrapping is never written
(`shared/transcript-formats.md` §4; [O] public transcripts and the tools that read them). So
the model read it, the provider billed it, and no message of the history holds it.

ctxsim keeps the text of the injections that carry one as `meta["injected_context"]` on the
next message (`[{"type", "name", "text"}]`): the token model counts it into the step it joined
(`calibration.call_estimates`, `hidden`), never into a message or an anchor, so the history
and every stage stay what the transcript shows. Which field holds the model's text, per type
[O observed records; X where a type's rendering is not public, its payload's own text]:

- `nested_memory`: `content.content` (or a plain `content`), under "Contents of <path>";
- `file`, `directory`: the file's `content` (as a Read result) or the listing;
- `edited_text_file`: the `snippet` of changed lines, under the file's name;
- `todo_reminder`: the list (`content`) as JSON;
- `hook_additional_context`, `critical_system_reminder`, `skill_listing`,
  `invoked_skills`: their `content` (strings or lists of strings);
- `queued_command`: the queued `prompt`; `plan_file_reference`: `planContent`.

Other types (hook bookkeeping, mode switches, tool deltas, …) carry no text of their own
here and are left out: a reminder whose wording is fixed in the CLI is not in the transcript.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# type → the payload fields holding the model's text, tried in order (dotted paths).
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "nested_memory": ("content.content", "content"),
    "file": ("content.file.content", "content.content", "content"),
    "directory": ("content",),
    "edited_text_file": ("snippet",),
    "todo_reminder": ("content",),
    "hook_additional_context": ("content",),
    "critical_system_reminder": ("content",),
    "skill_listing": ("content",),
    "invoked_skills": ("skills", "content"),
    "queued_command": ("prompt",),
    "plan_file_reference": ("planContent",),
}
# The name the model reads beside the text (a path or file name), when the payload has one.
NAME_FIELDS = ("path", "filename", "filePath", "planFilePath")


def _at(payload: Mapping[str, Any], dotted: str) -> Any:
    value: Any = payload
    for key in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    if isinstance(value, list) and value:  # a todo list, skills: their JSON
        return json.dumps(value, ensure_ascii=False)
    return ""  # nothing, or a mapping whose text a more precise field holds


def injected_context(attachment: Any) -> dict[str, str] | None:
    """`{"type", "name", "text"}` of an attachment record's payload whose text reaches the
    model, else None; `name` is the file or path the reminder names ("" when none)."""
    if not isinstance(attachment, Mapping):
        return None
    kind = attachment.get("type")
    fields = TEXT_FIELDS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        return None
    text = next((t for t in (_text(_at(attachment, f)) for f in fields) if t), "")
    if not text:
        return None
    name = next((v for f in NAME_FIELDS if isinstance(v := attachment.get(f), str) and v), "")
    return {"type": str(kind), "name": name, "text": text}
