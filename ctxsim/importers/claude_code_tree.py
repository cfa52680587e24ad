"""The record tree of a Claude Code session JSONL (`claude_code.py` maps it to messages).

Records are reduced to small nodes as they stream in; each names its parent (`parentUuid`), so
the file is a tree: rewinds and edits branch it, a compaction starts a new root that names the
old leaf (`logicalParentUuid`), subagent runs are trees of their own (`isSidechain`), and
from CLI 2.1 the results of parallel calls hang off their own `tool_use` line.
"""

from __future__ import annotations

from typing import Any

from .anthropic_content import AssistantContent, UserContent


class Node:
    """One record of the tree, reduced to what the mapping needs."""

    __slots__ = (
        "line", "uuid", "parent", "logical_parent", "sidechain", "role", "msg_id",
        "timestamp", "content", "meta_flags", "usage", "model", "agent_id", "marker",
        "injected",
    )

    def __init__(self, line: int, uuid: str, record: dict[str, Any]):
        self.line = line
        self.uuid = uuid
        parent = record.get("parentUuid")
        self.parent = parent if isinstance(parent, str) else None
        logical = record.get("logicalParentUuid")
        self.logical_parent = logical if isinstance(logical, str) else None
        self.sidechain = record.get("isSidechain") is True
        self.role: str | None = None
        self.msg_id: str | None = None
        timestamp = record.get("timestamp")
        self.timestamp = timestamp if isinstance(timestamp, str) else None
        self.content: UserContent | AssistantContent | None = None
        self.meta_flags: dict[str, Any] | None = None
        self.usage: Any = None
        self.model: str | None = None
        agent_id = record.get("agentId")
        self.agent_id = agent_id if isinstance(agent_id, str) else None
        # A compact_boundary / microcompact_boundary record (SPEC-agents §2.5.0.5).
        self.marker: dict[str, Any] | None = None
        # An attachment record's text that reaches the model (claude_code_attachments).
        self.injected: dict[str, str] | None = None


def parent_of(node: Node, nodes: dict[str, Node]) -> Node | None:
    """The record `node` continues, on its own side: a subagent's first line may name the
    main-chain line that started it, but the main chain is not part of the subagent."""
    parent = nodes.get(node.parent) if node.parent else None
    if parent is not None and parent.sidechain != node.sidechain:
        return None
    return parent


def chain_to(leaf: Node, nodes: dict[str, Node],
             previous: dict[str, Node] | None = None) -> list[Node]:
    """From `leaf` up to its root, in file order; crosses compaction boundaries.

    `previous` (the record before each one in file order): a record that names a parent the
    file does not hold continues the one written before it. Claude Code 2.1 files name
    records they never wrote (a `progress` or `stop_hook_summary` line's parent, a
    `compact_boundary`'s `logicalParentUuid`; 41 of 146 boundaries in public sessions):
    ending the chain there dropped everything before it."""
    chain: list[Node] = []
    seen: set[str] = set()
    node: Node | None = leaf
    while node is not None and node.uuid not in seen:
        seen.add(node.uuid)
        chain.append(node)
        parent = parent_of(node, nodes)
        if parent is None and node.logical_parent:
            parent = nodes.get(node.logical_parent)
        if parent is None and previous is not None and _names_a_missing_record(node, nodes):
            parent = previous.get(node.uuid)
        node = parent
    chain.reverse()
    return chain


def _names_a_missing_record(node: Node, nodes: dict[str, Node]) -> bool:
    named = [u for u in (node.parent, node.logical_parent) if u]
    return bool(named) and all(u not in nodes for u in named)


def with_side_branches(chain: list[Node], tree: list[Node]) -> list[Node]:
    """The chain plus the lines of its responses that sit on side branches.

    The other lines of a response (same `message.id`) join it. A result line off the chain
    joins when it answers a call of the chain's responses that the chain leaves unanswered:
    from CLI 2.1 each parallel result hangs off its own `tool_use` line, and `progress`
    lines (hooks, bash output) written between a call and its result can put the result,
    or the next message, on a fork of their own. A result line that also carries the user's
    text (typed while parallel calls ran, 2.1) joins with it. Lines are kept in file order.
    """
    on_chain = {node.uuid for node in chain}
    msg_ids = {node.msg_id for node in chain if node.role == "assistant" and node.msg_id}
    extra = [
        node for node in tree
        if node.uuid not in on_chain and node.role == "assistant" and node.msg_id in msg_ids
    ]
    calls = {
        call.id
        for node in (*chain, *extra)
        if isinstance(node.content, AssistantContent)
        for call in node.content.calls
    }
    answered = {
        result[0]
        for node in chain
        if isinstance(node.content, UserContent)
        for result in node.content.results
    }
    for node in tree:
        content = node.content
        if node.uuid in on_chain or not isinstance(content, UserContent):
            continue
        if not content.results:
            continue
        ids = {result[0] for result in content.results}
        if not ids & calls or ids <= answered:
            continue
        answered |= ids
        extra.append(node)
    if not extra:
        return chain
    return sorted(chain + extra, key=lambda node: node.line)


def root_of(node: Node, nodes: dict[str, Node], roots: dict[str, str]) -> str:
    # A dict, not a list: a chain written leaf first walks its whole length here, and a list
    # scan per step made that quadratic (issue 20 item 8). Insertion order is kept.
    path: dict[str, None] = {}
    current = node
    while True:
        known = roots.get(current.uuid)
        if known is not None:
            break
        path[current.uuid] = None
        parent = parent_of(current, nodes)
        if parent is None or parent.uuid in path:
            known = current.uuid
            break
        current = parent
    for uuid in path:
        roots[uuid] = known
    return known


def last_message_node(tree: list[Node]) -> Node | None:
    for node in reversed(tree):
        if node.role is not None:
            return node
    return None
