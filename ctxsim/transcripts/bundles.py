"""Loose files that belong together: Claude Code's request-body directory uploaded as its files
(`index.jsonl` with its `*.request.json` / `*.response.json`) is packed into one archive, so
it imports as the `claude-code-requests` format, like the .zip of the folder would."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence

from django.core.files.uploadedfile import SimpleUploadedFile, UploadedFile

BODY_SUFFIXES = (".request.json", ".response.json")


def is_request_bundle(files: Sequence[UploadedFile]) -> bool:
    names = [(f.name or "").rsplit("/", 1)[-1] for f in files]
    return (
        len(files) > 1
        and "index.jsonl" in names
        and all(n == "index.jsonl" or n.endswith(BODY_SUFFIXES) for n in names)
    )


def pack(files: Sequence[UploadedFile], limit: int) -> UploadedFile | None:
    """One zip holding the files, or None when together they are over `limit` bytes."""
    if sum(f.size or 0 for f in files) > limit:
        return None
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for upload in files:
            upload.open("rb")
            archive.writestr((upload.name or "file").rsplit("/", 1)[-1], upload.read())
    return SimpleUploadedFile("claude-code-requests.zip", buffer.getvalue(),
                              content_type="application/zip")
