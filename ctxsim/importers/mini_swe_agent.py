"""mini-swe-agent trajectories (`<instance>.traj.json`): `{info, messages, trajectory_format}`.

`trajectory_format` is `mini-swe-agent-1` (v1.x) or `mini-swe-agent-1.1` (v2.x). The messages
are OpenAI-style, but the agent acts through them, so they are never a plain chat:

- text actions (v1; v2 text models): an assistant message holding exactly one action block
  (the config's `action_regex`, default ```` ```bash ````, v2's ```` ```mswea_bash_command ````
  or `<mswea_bash_command>`) is one synthetic call
  `mini-swe-agent-<n>` named `bash` with `{"command": …}`; the next user message is its result
  (the observation, a timeout notice, or the final submission). An assistant message with no
  or several blocks made no call: the next user message is the format error the agent sent.
- v2 tool-call models: the native `tool_calls` and the `role: "tool"` answers are used as they
  are; v2 text models: `extra.actions` (one call per action), answered by the following user
  messages in order.

Recorded usage (SPEC §11): each assistant message's `extra.response.usage` (a LiteLLM dump:
`prompt_tokens` includes the cache) or, in v1, its `extra.response.usage`/`usage` when
present; `info.model_stats` (cost, `api_calls`) is kept on the session. The version is
`info.mini_version` (also as `agent_version`). No compaction, images or sub-agents.
"""

from __future__ import annotations

import re
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.pipeline.usage import openai_recorded

from .common import (
    arguments_text,
    compact_json,
    expect_dict,
    expect_list,
    obj,
    require_sessions,
    title_from,
)
from .errors import TranscriptError, type_name
from .source import Probe, Source

NAME = "mini-swe-agent"
# The action blocks mini-swe-agent parses when the config names none: v1's ```bash block,
# v2's ```mswea_bash_command block and its XML variant [S SWE-agent/mini-swe-agent@a83fcae8
# src/minisweagent/models/litellm_textbased_model.py:8, config/benchmarks/swebench_xml.yaml].
DEFAULT_ACTIONS = (r"```bash\s*\n(.*?)\n```", r"```mswea_bash_command\s*\n(.*?)\n```",
                   r"<mswea_bash_command>(.*?)</mswea_bash_command>")
_OBSERVATION = "<returncode>"


def is_bare_trajectory(value: Any) -> bool:
    """A messages list saved on its own (mini-swe-agent's own test data): the agent's
    `<returncode>` observations answering fenced bash actions."""
    if not isinstance(value, list) or not value or not all(
            isinstance(m, dict) and "role" in m for m in value[:200]):
        return False
    texts = [(m.get("role"), m.get("content")) for m in value[:200]]
    return any(r == "user" and isinstance(c, str) and c.lstrip().startswith(_OBSERVATION)
               for r, c in texts) and any(
        r == "assistant" and isinstance(c, str) and any(re.search(p, c, re.DOTALL)
                                                         for p in DEFAULT_ACTIONS)
        for r, c in texts)


def detect(probe: Probe) -> bool | str:
    document = probe.document() if not probe.is_jsonl else None
    if is_bare_trajectory(document):
        return True
    if not isinstance(document, dict):
        return "not a JSON object with `trajectory_format`"
    tag = document.get("trajectory_format")
    if isinstance(tag, str) and tag.startswith("mini-swe-agent"):
        return True  # parse says what is wrong with `messages`, if anything
    if isinstance(document.get("messages"), list) and "mini_version" in obj(document.get("info")):
        return True  # a trajectory saved before `trajectory_format` was written [X]
    return "no `trajectory_format` starting with mini-swe-agent"


def _action_patterns(config: dict[str, Any]) -> list[re.Pattern[str]]:
    """The config's `action_regex` (agent in v1, model in v2) when it compiles, else the
    defaults."""
    for section in ("agent", "model"):
        given = obj(config.get(section)).get("action_regex")
        if isinstance(given, str):
            try:
                return [re.compile(given, re.DOTALL)]
            except re.error:
                break
    return [re.compile(p, re.DOTALL) for p in DEFAULT_ACTIONS]


def _text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") if isinstance(part, dict)
                       and isinstance(part.get("text"), str) else "" for part in content)
    raise TranscriptError(f"mini-swe-agent: `{where}` should be text, not {type_name(content)}")


def _usage(message: dict[str, Any]) -> dict[str, Any] | None:
    extra = obj(message.get("extra"))
    response = obj(extra.get("response"))
    for usage in (response.get("usage"), message.get("usage")):
        recorded = openai_recorded(usage)
        if recorded is not None:
            return recorded
    return None


def parse(source: Source) -> list[Session]:
    document = source.document()
    if isinstance(document, list):
        document = {"messages": document}  # saved without `info`
    if not isinstance(document, dict):
        raise TranscriptError(f"a mini-swe-agent trajectory should be a JSON object, "
                              f"not {type_name(document)}")
    raw = expect_list(document.get("messages"), "messages")
    info = obj(document.get("info"))
    config = obj(info.get("config"))
    action = _action_patterns(config)

    messages: list[Message] = []
    synthetic = 0
    waiting: list[str] = []  # synthetic calls still to be answered by user messages
    for index, item in enumerate(raw):
        where = f"messages[{index}]"
        item = expect_dict(item, where)
        role = item.get("role")
        text = _text(item.get("content"), f"{where}.content")
        meta: dict[str, Any] = {"message_index": index}
        if role == "system":
            meta["source"] = "system_prompt"
            messages.append(Message.of("system", text, meta=meta))
        elif role == "assistant":
            recorded = _usage(item)
            if recorded is not None:
                meta["recorded"] = recorded
            # A reasoning model's thinking (deepseek-reasoner's `reasoning_content`), kept to
            # show beside the reply as the OpenAI chat importer does; not sent back.
            for key in ("reasoning_content", "reasoning"):
                if isinstance(item.get(key), str) and item[key]:
                    meta["reasoning"] = item[key]
            native = item.get("tool_calls")
            calls: list[ToolCall] = []
            waiting = []
            if isinstance(native, list) and native:
                for number, call in enumerate(native):
                    call = expect_dict(call, f"{where}.tool_calls[{number}]")
                    function = obj(call.get("function"))
                    calls.append(ToolCall(str(call.get("id") or ""),
                                          str(function.get("name") or ""),
                                          arguments_text(function.get("arguments"))))
            else:
                for command in _actions(item, text, action):
                    synthetic += 1
                    calls.append(ToolCall(f"{NAME}-{synthetic}", "bash",
                                          compact_json({"command": command})))
                waiting = [call.id for call in calls]
            messages.append(Message.of("assistant", text, tool_calls=calls, meta=meta))
        elif role == "tool":
            call_id = item.get("tool_call_id") if isinstance(item.get("tool_call_id"), str) \
                else ""
            messages.append(Message.of("tool", text, tool_call_id=call_id, meta=meta))
        elif role == "user":
            if waiting:
                messages.append(Message.of("tool", text, tool_call_id=waiting.pop(0),
                                           meta=meta))
            else:
                messages.append(Message.of("user", text, meta=meta))
        elif role == "exit":
            continue  # v2 records the exit as a message of its own; not sent to the model
        else:
            raise TranscriptError(f"mini-swe-agent: `{where}.role` {role!r} is not "
                                  "system, user, assistant or tool")
    require_sessions(messages, "the trajectory has no messages")
    meta_out: dict[str, Any] = {key: info[key] for key in
                                ("exit_status", "model_stats", "mini_version") if key in info}
    if isinstance(info.get("mini_version"), str):
        meta_out["agent_version"] = info["mini_version"]
    meta_out["trajectory_format"] = document.get("trajectory_format")
    if isinstance(document.get("instance_id"), str):
        meta_out["instance_id"] = document["instance_id"]
    model = obj(config.get("model"))
    if isinstance(model.get("model_name"), str):
        meta_out["model"] = model["model_name"]
    title = title_from(messages, "mini-swe-agent trajectory")
    if meta_out.get("instance_id"):
        title = f"{meta_out['instance_id']}: {title}"
    return [Session(format=NAME, title=title, messages=tuple(messages),
                    key=str(meta_out.get("instance_id", "")), meta=meta_out)]


def _actions(item: dict[str, Any], text: str, patterns: list[re.Pattern[str]]) -> list[str]:
    """The commands an assistant message ran: v2's `extra.actions`, else exactly one action
    block of the text (the agent refuses a message with none or several)."""
    extra = obj(item.get("extra"))
    listed = extra.get("actions")
    if isinstance(listed, list):
        return [str(a.get("command", "")) if isinstance(a, dict) else str(a) for a in listed]
    for pattern in patterns:
        found = pattern.findall(text)
        if found:
            return [str(found[0]).strip()] if len(found) == 1 else []
    return []
