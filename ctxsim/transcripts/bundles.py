"""Loose files that belong together are packed into one archive, so they import as the
multi-file format they make up, like the .zip of their folder would:

- Claude Code's request-body directory (`index.jsonl` with `*.request.json` /
  `*.response.json`) → `claude-code-requests`;
- a Cline / Roo Code task folder (`api_conversation_history.json` with `ui_messages.json`,
  `task_metadata.json`, `context_history.json`) → `cline` / `roo-code`;
- an OpenHands V1 conversation directory (`base_state.json`, `event-NNNNN-<id>.json`) →
  `openhands-v1`;
- OpenCode's storage files (`ses_*.json`, `msg_*.json`, `prt_*.json`) → `opencode`;
- a `codex exec --json` stream with the rollout beside it (two `.jsonl` files, one starting
  with `thread.started`, the other with `session_meta`) → `codex-exec`.

Upload names keep no folders, so one bundle is one task, one conversation or one stream.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Sequence

from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile

BODY_SUFFIXES = (".request.json", ".response.json")
TASK_FILES = ("api_conversation_history.json", "ui_messages.json", "task_metadata.json",
              "context_history.json")
_EVENT_FILE = re.compile(r"^event-\d+-.*\.json$")


def _names(files: Sequence[UploadedFile]) -> list[str]:
    return [(f.name or "").rsplit("/", 1)[-1] for f in files]


def _head(upload: UploadedFile, size: int = 400) -> bytes:
    try:
        upload.open("rb")
        head = upload.read(size)
        upload.seek(0)
    except OSError:
        return b""
    return head if isinstance(head, bytes) else b""


def bundle_name(files: Sequence[UploadedFile]) -> str | None:
    """The archive name for files that make up one multi-file transcript, else None."""
    if len(files) < 2:
        return None
    names = _names(files)
    if "index.jsonl" in names and all(n == "index.jsonl" or n.endswith(BODY_SUFFIXES)
                                      for n in names):
        return "claude-code-requests.zip"
    if TASK_FILES[0] in names and set(names) <= set(TASK_FILES) and len(set(names)) == len(names):
        return "task.zip"
    if any(_EVENT_FILE.match(n) for n in names) and all(
            n == "base_state.json" or _EVENT_FILE.match(n) for n in names):
        return "openhands-conversation.zip"
    if any(n.startswith("ses_") for n in names) and all(
            n.startswith(("ses_", "msg_", "prt_")) and n.endswith(".json") for n in names):
        return "opencode-storage.zip"
    if len(files) == 2 and all(n.endswith(".jsonl") for n in names):
        heads = [_head(f) for f in files]
        if any(b'"thread.started"' in h for h in heads) and any(b'"session_meta"' in h
                                                               for h in heads):
            return "codex-exec.zip"
    return None


def pack(files: Sequence[UploadedFile], limit: int,
         name: str = "claude-code-requests.zip") -> UploadedFile | None:
    """One zip holding the files, or None when together they are over `limit` bytes."""
    if sum(f.size or 0 for f in files) > limit:
        return None
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for upload in files:
            upload.open("rb")
            archive.writestr((upload.name or "file").rsplit("/", 1)[-1], upload.read())
    return SimpleUploadedFile(name, buffer.getvalue(), content_type="application/zip")
