"""Small builders shared by the pipeline tests."""

from __future__ import annotations

from typing import Any

from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.profiles import resolve
from ctxsim.pipeline.spill import MemorySpillSink, SpillService
from ctxsim.pipeline.stages import StageContext
from ctxsim.pipeline.tokens import get_counter


def user(text: str = "go", **kw: Any) -> Message:
    return Message.of("user", text, **kw)


def system(text: str = "sys") -> Message:
    return Message.of("system", text)


def assistant(*call_ids: str, text: str = "", names: dict[str, str] | None = None) -> Message:
    names = names or {}
    calls = [ToolCall(id=c, name=names.get(c, "read_file"), arguments="{}") for c in call_ids]
    return Message.of("assistant", text, tool_calls=calls)


def tool(call_id: str, content: str | bytes = "ok", **kw: Any) -> Message:
    return Message.of("tool", content, tool_call_id=call_id, **kw)


def ctx(profile: str = "chatcli", loop_turn: int = 5, sink: Any = None, **config: Any
        ) -> StageContext:
    cfg = resolve(profile, config)
    return StageContext(cfg.values, get_counter(cfg.values["counter"]), loop_turn, 0,
                        SpillService(sink or MemorySpillSink()))


def contents(history) -> list[bytes]:
    return [m.content for m in history]
