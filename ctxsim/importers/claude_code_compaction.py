"""Claude Code's compaction records (SPEC-agents §2.5.0.5): `compact_boundary` and
`microcompact_boundary` lines become markers in the `meta` of the message that follows them,
and the session lists them as `meta.recorded_compactions` (through `recorded`, as every
importer does). Part of the `claude_code` importer.
"""

from __future__ import annotations

from typing import Any

from .claude_code_tree import Node


def boundary_marker(record: dict[str, Any]) -> dict[str, Any] | None:
    """The fields of a compaction record that SPEC-agents §2.5.0.5 keeps, by subtype."""
    subtype = record.get("subtype")
    if subtype == "compact_boundary":
        meta = record.get("compactMetadata")
        meta = meta if isinstance(meta, dict) else {}
        segment = meta.get("preservedSegment")
        return {"subtype": subtype, "trigger": meta.get("trigger"),
                "pre_tokens": meta.get("preTokens"), "uuid": record.get("uuid"),
                "logical_parent_uuid": record.get("logicalParentUuid"),
                "segment": segment if isinstance(segment, dict) else None}
    if subtype == "microcompact_boundary":
        meta = record.get("microcompactMetadata")
        meta = meta if isinstance(meta, dict) else {}
        return {"subtype": subtype, "trigger": meta.get("trigger"),
                "pre_tokens": meta.get("preTokens"), "tokens_saved": meta.get("tokensSaved"),
                "compacted_tool_ids": list(meta.get("compactedToolIds") or []),
                "cleared_attachment_uuids": list(meta.get("clearedAttachmentUUIDs") or [])}
    return None


def _segment_uuids(segment: dict[str, Any] | None, nodes: dict[str, Node]) -> list[str]:
    """The uuids on the chain from `headUuid` to `tailUuid` (ctxsim's reading of a partial
    compaction's `preservedSegment`); empty when absent or when the chain does not meet."""
    if not segment:
        return []
    head, tail = segment.get("headUuid"), segment.get("tailUuid")
    path: list[str] = []
    node = nodes.get(tail) if isinstance(tail, str) else None
    while node is not None and node.uuid not in path:
        path.append(node.uuid)
        if node.uuid == head:
            return path[::-1]
        node = nodes.get(node.parent) if node.parent else None
    return []


def marker_meta(marker: dict[str, Any], summary: bool,
                 nodes: dict[str, Node]) -> dict[str, Any]:
    """`meta` keys for the message that follows a boundary record."""
    if marker["subtype"] == "microcompact_boundary":
        return {"microcompaction": {k: marker[k] for k in (
            "trigger", "pre_tokens", "tokens_saved", "compacted_tool_ids",
            "cleared_attachment_uuids")}}
    return {"compaction": {
        "source": "claude-code", "kind": "summary" if summary else "boundary_only",
        "trigger": marker["trigger"], "pre_tokens": marker["pre_tokens"],
        "boundary_uuid": marker["uuid"], "logical_parent_uuid": marker["logical_parent_uuid"],
        "preserved_uuids": _segment_uuids(marker["segment"], nodes)}}
