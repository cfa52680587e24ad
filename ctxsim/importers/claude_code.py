"""Claude Code session JSONL (`~/.claude/projects/<cwd>/<session>.jsonl`).

The file is a tree of records linked by `uuid`/`parentUuid`, written one content block per
line while a response streams. Mapping (SPEC §7):

- the main session is the chain from the last non-sidechain record up to its root (across
  `logicalParentUuid` at a compaction boundary; a record naming a parent the file does not
  hold continues the record written before it); other branches (rewinds) are left out;
- each sidechain tree (a subagent run) becomes its own session linked to the main one;
- lines sharing `message.id` are one API response, hence one assistant message;
- from CLI 2.1 the results of parallel calls hang off their own `tool_use` line, so all but
  the last sit on one-line side branches: they are gathered by the assistant `message.id`;
- every `tool_result` block becomes a `tool` message (`tool_call_id` = `tool_use_id`,
  `is_error` kept); calls are counted once per `tool_use` id.

Records are reduced to small nodes as they stream in, so the parsed lines (and the duplicate
base64 images in `toolUseResult`) are dropped at once.
"""

from __future__ import annotations

import json
from typing import Any

from ctxsim.pipeline.messages import Message, Session
from ctxsim.pipeline.usage import anthropic_recorded

from .anthropic_content import AssistantContent, UserContent, split_assistant, split_user
from .claude_code_attachments import injected_context
from .claude_code_compaction import boundary_marker, marker_meta
from .claude_code_tree import Node, chain_to, last_message_node, root_of, with_side_branches
from .common import HistoryBuilder, Names, expect_dict, require_sessions, title_from
from .errors import TranscriptError, type_name
from .recorded import with_recorded_compactions
from .source import Probe, Source
from .titles import project_name

NAME = "claude-code"

RECORD_TYPES = Names({
    "summary", "file-history-snapshot", "queue-operation", "progress", "attachment",
    "custom-title", "ai-title", "agent-name", "last-prompt", "pr-link", "permission-mode",
    "agent-setting", "bridge-session", "worktree-state",
})
SUBAGENT_TOOLS = ("Task", "Agent")
SYNTHETIC = "<synthetic>"


def detect(probe: Probe) -> bool | str:
    if not probe.records:
        return "not JSON Lines"
    for record in probe.records:
        if not isinstance(record, dict) or "payload" in record:
            continue
        if "parentUuid" in record or "isSidechain" in record:
            return True
        if record.get("type") in RECORD_TYPES:
            return True
    return "no line has parentUuid/isSidechain or a Claude Code record type"


def _read_nodes(source: Source) -> tuple[dict[str, Node], list[Node], dict[str, Any]]:
    nodes: dict[str, Node] = {}
    order: list[Node] = []
    info: dict[str, Any] = {"summaries": {}, "titles": [], "duplicate_lines": 0}
    # Claude Code now and then appends a record with no line break before it (seen in 2.0.76
    # to 2.1.x sessions): each record of such a line is read.
    for line, record in source.records(glued=True):
        if not isinstance(record, dict):
            raise TranscriptError(
                f"each Claude Code line should be a JSON object, not {type_name(record)}",
                line=line,
            )
        kind = record.get("type")
        if kind == "summary":
            leaf, summary = record.get("leafUuid"), record.get("summary")
            if isinstance(leaf, str) and isinstance(summary, str):
                info["summaries"][leaf] = summary
            continue
        if kind in ("custom-title", "ai-title"):
            for key in ("customTitle", "aiTitle", "title"):
                if isinstance(record.get(key), str):
                    info["titles"].append(record[key])
            continue
        uuid = record.get("uuid")
        if not isinstance(uuid, str):
            continue
        if uuid in nodes:
            # A resumed or forked session copies earlier lines: the first copy stands.
            info["duplicate_lines"] += 1
            continue
        node = Node(line, uuid, record)
        if kind == "system":
            node.marker = boundary_marker(record)
        elif kind == "attachment":
            node.injected = injected_context(record.get("attachment"))
        if kind in ("user", "assistant"):
            _fill_message(node, kind, record, line)
            for key in ("sessionId", "cwd", "version", "gitBranch"):
                if key not in info and isinstance(record.get(key), str):
                    info[key] = record[key]
        nodes[uuid] = node
        order.append(node)
    return nodes, order, info


def _fill_message(node: Node, kind: str, record: dict[str, Any], line: int) -> None:
    message = expect_dict(record.get("message"), "message", line)
    node.role = kind
    if kind == "assistant":
        msg_id = message.get("id")
        node.msg_id = msg_id if isinstance(msg_id, str) and msg_id else None
        node.content = split_assistant(message.get("content"), "message.content", line)
        node.usage = message.get("usage")
        model = message.get("model")
        node.model = model if isinstance(model, str) else None
    else:
        content = split_user(message.get("content"), "message.content", line)
        # Encode the (possibly large) results now, so only their bytes stay in memory.
        content.results = [
            (tool_use_id, text if isinstance(text, bytes) else
             text.encode("utf-8", "surrogatepass"), is_error, parts)
            for tool_use_id, text, is_error, parts in content.results
        ]
        node.content = content
        flags = {}
        if record.get("isMeta") is True:
            flags["injected"] = True
        if record.get("isCompactSummary") is True:
            flags["compact_summary"] = True
        node.meta_flags = flags or None
    if record.get("isApiErrorMessage") is True:
        node.meta_flags = {**(node.meta_flags or {}), "api_error": True}


def _messages(selected: list[Node], sidechain: bool,
              nodes: dict[str, Node] | None = None) -> tuple[tuple[Message, ...], dict]:
    builder = HistoryBuilder()
    seen_calls: set[str] = set()
    # SPEC §11: a response is billed once per `message.id`, however many lines or drafts
    # carry it; the first draft with the id is the model call it answers.
    billed: set[str] = set()
    stats: dict[str, Any] = {"model": None, "started": None, "ended": None}
    # Boundary records waiting for the next user or assistant record (SPEC-agents §2.5.0.5).
    held: list[dict[str, Any]] = []
    # Attachment texts waiting for the next message, which carries them (SPEC §11 hidden
    # context: claude_code_attachments).
    injected: list[dict[str, str]] = []
    for node in selected:
        if node.role is None:
            if node.marker is not None:
                held.append(node.marker)
            elif node.injected is not None:
                injected.append(node.injected)
            continue
        markers: dict[str, Any] = {"uuid": node.uuid}
        if injected:
            markers["injected_context"] = injected
            injected = []
        if held:
            summary = node.role == "user" and bool(
                node.meta_flags and node.meta_flags.get("compact_summary"))
            for marker in held:
                markers.update(marker_meta(marker, summary, nodes or {}))
            held = []
        if node.timestamp:
            stats["started"] = stats["started"] or node.timestamp
            stats["ended"] = node.timestamp
        if isinstance(node.content, AssistantContent):  # role "assistant"
            content = node.content
            draft = builder.assistant(node.msg_id or node.uuid)
            if not draft.meta:
                draft.meta.update(source_line=node.line, timestamp=node.timestamp)
                if node.usage is not None:
                    # Every line of a response repeats the same usage: keep it once.
                    draft.meta["usage"] = node.usage
                    recorded = anthropic_recorded(node.usage)
                    # Claude Code's own stand-in replies (model "<synthetic>": "No response
                    # requested.", API errors) carry zeroed usage: no model call billed them.
                    if node.model == SYNTHETIC or (recorded and not recorded["total_input"]):
                        recorded = None
                    if recorded is not None and (node.msg_id or node.uuid) not in billed:
                        billed.add(node.msg_id or node.uuid)
                        draft.meta["recorded"] = recorded
                if node.msg_id:
                    draft.meta["message_id"] = node.msg_id
                if node.model:
                    draft.meta["model"] = node.model
                    stats["model"] = stats["model"] or node.model
                if sidechain:
                    draft.meta["sidechain"] = True
                if node.meta_flags:
                    draft.meta.update(node.meta_flags)
            recorded = draft.meta.get("recorded")
            if recorded is not None and isinstance(node.usage, dict):
                # Streamed lines repeat the input figures; the output grows to the last line.
                output = node.usage.get("output_tokens")
                if type(output) is int and output > (recorded["output"] or 0):
                    recorded["output"] = output
            for key, value in markers.items():
                if key == "injected_context":
                    draft.meta.setdefault(key, []).extend(value)
                else:
                    draft.meta.setdefault(key, value)
            draft.texts.extend(content.texts)
            if content.thinking:
                draft.meta.setdefault("thinking", []).extend(content.thinking)
            for call in content.calls:
                if call.id not in seen_calls and draft.add_call(call):
                    seen_calls.add(call.id)
            continue
        content_u = node.content
        assert isinstance(content_u, UserContent)  # role "user": _fill_message set both
        base: dict[str, Any] = {"source_line": node.line, "timestamp": node.timestamp,
                                "uuid": node.uuid}
        marked = {k: v for k, v in markers.items() if k != "uuid"}
        if sidechain:
            base["sidechain"] = True
        has_text = bool(content_u.texts or content_u.binary_parts or not content_u.results)
        for tool_use_id, data, is_error, parts in content_u.results:
            meta = dict(base, binary_parts=parts) if parts else dict(base)
            if marked and not has_text:
                meta.update(marked)  # a boundary followed first by results: the first one
                marked = {}
            builder.add(Message.of(
                "tool", data, tool_call_id=tool_use_id, is_error=is_error, meta=meta
            ))
        if has_text:
            meta = dict(base, **marked)
            if content_u.binary_parts:
                meta["binary_parts"] = content_u.binary_parts
            if node.meta_flags:
                meta.update(node.meta_flags)
            builder.add(Message.of("user", "".join(content_u.texts), meta=meta))
    return builder.messages(), stats


def parse(source: Source) -> list[Session]:
    nodes, order, info = _read_nodes(source)
    main_tree = [node for node in order if not node.sidechain]
    side_trees: dict[str, list[Node]] = {}
    roots: dict[str, str] = {}
    for node in order:
        if node.sidechain:
            side_trees.setdefault(root_of(node, nodes, roots), []).append(node)

    session_id = info.get("sessionId", "")
    base_meta = {
        key: info[key] for key in ("cwd", "version", "gitBranch") if key in info
    }
    sessions: list[Session] = []
    main_key = session_id or "main"
    task_prompts: dict[str, str] = {}
    main_leaf = last_message_node(main_tree)
    if main_leaf is not None:
        previous = {b.uuid: a for a, b in zip(main_tree, main_tree[1:], strict=False)}
        selected = with_side_branches(chain_to(main_leaf, nodes, previous), main_tree)
        messages, stats = _messages(selected, sidechain=False, nodes=nodes)
        title = _title(selected, info) or title_from(
            messages, "Claude Code session",
            project_name(cwd) if isinstance(cwd := info.get("cwd"), str) else "")
        included = sum(1 for node in selected if node.role is not None)
        available = sum(1 for node in main_tree if node.role is not None)
        warnings: tuple[str, ...] = ()
        if available > included:
            warnings = (
                f"{available - included} message lines on abandoned branches (rewinds or "
                "edits) were left out",
            )
        main_meta = with_recorded_compactions(_session_meta(session_id, base_meta, stats, info),
                                              messages)
        sessions.append(Session(
            format=NAME, title=title, messages=messages, key=main_key,
            meta=main_meta,
            warnings=warnings,
        ))
        task_prompts = _task_prompts(messages)

    for index, tree in enumerate(side_trees.values(), start=1):
        leaf = last_message_node(tree)
        if leaf is None:
            continue
        selected = with_side_branches(chain_to(leaf, nodes), tree)
        messages, stats = _messages(selected, sidechain=True, nodes=nodes)
        agent_id = next((node.agent_id for node in tree if node.agent_id), None)
        meta = with_recorded_compactions(_session_meta(session_id, base_meta, stats, info),
                                         messages)
        meta["sidechain"] = True
        if agent_id:
            meta["agent_id"] = agent_id
        prompt = next((m.text for m in messages if m.role == "user"), "")
        if prompt in task_prompts:
            meta["parent_tool_use_id"] = task_prompts.pop(prompt)
        sessions.append(Session(
            format=NAME,
            title="Subagent: " + title_from(messages, "subagent"),
            messages=messages,
            key=agent_id or f"sidechain-{index}",
            # A 2.x subagent file holds no main chain: its parent session is another file.
            parent_key=main_key if main_leaf is not None else (session_id or None),
            meta=meta,
        ))
    return require_sessions(sessions, "the Claude Code file has no user or assistant lines")


def _title(selected: list[Node], info: dict[str, Any]) -> str:
    if info["titles"]:
        return info["titles"][-1]
    summaries = info["summaries"]
    for node in reversed(selected):
        if node.uuid in summaries:
            return summaries[node.uuid]
    return ""


def _session_meta(session_id: str, base: dict, stats: dict, info: dict) -> dict[str, Any]:
    meta: dict[str, Any] = {"session_id": session_id, **base}
    for key in ("model", "started", "ended"):
        if stats.get(key):
            meta[key] = stats[key]
    if info["duplicate_lines"]:
        meta["duplicate_lines"] = info["duplicate_lines"]
    return meta


def _task_prompts(messages: tuple[Message, ...]) -> dict[str, str]:
    """Subagent prompt text → the Task call that started it (1.0.x has no explicit link)."""
    prompts: dict[str, str] = {}
    for message in messages:
        for call in message.tool_calls:
            if call.name in SUBAGENT_TOOLS:
                try:
                    prompt = json.loads(call.arguments).get("prompt")
                except (ValueError, AttributeError):
                    continue
                if isinstance(prompt, str):
                    prompts.setdefault(prompt, call.id)
    return prompts
