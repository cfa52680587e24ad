"""Why a prompt prefix changed between two calls: the first changed message and its stage.

Pure functions over the engine's `CallResult`. Messages are compared in order (the same object,
or an equal value); the first position where the previous prompt and this one differ is where
a provider cache stops matching.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass

from ctxsim.pipeline.messages import Message
from ctxsim.pipeline.replay import CallResult

# What happened at the first differing position.
REWRITTEN = "rewritten"  # a stage changed an earlier message's content
REMOVED = "removed"  # a stage dropped an earlier message
INJECTED = "injected"  # a stage inserted a message (anchor, synthetic result) before new ones
RESTORED = "restored"  # an earlier call's rewrite was not repeated (per-call stages)
REORDERED = "reordered"  # the same messages in another order
COMPACTIONS = (REWRITTEN, REMOVED)


def same(a: Message, b: Message) -> bool:
    return a is b or a == b


def common_prefix(previous: Sequence[Message], current: Sequence[Message]) -> int:
    """Number of leading messages two prompts share."""
    n = 0
    for a, b in zip(previous, current, strict=False):
        if not same(a, b):
            break
        n += 1
    return n


@dataclass(frozen=True)
class BreakCause:
    """Where a prompt stopped extending the previous one."""

    position: int  # index in the previous prompt of the first message that is not kept
    kind: str
    origin: int | None  # transcript index of the message concerned
    stage: str  # the stage responsible ("" when the replay cannot tell)
    role: str

    @property
    def is_compaction(self) -> bool:
        return self.kind in COMPACTIONS


def _find(history: Sequence[Message], origin: int) -> Message | None:
    # Raw histories hold message i at index i; stage outputs may have moved or dropped some.
    if origin < len(history) and history[origin].origin == origin:
        return history[origin]
    return next((m for m in history if m.origin == origin), None)


def _stage_changing(call: CallResult, origin: int) -> str:
    """The first stage at this call whose output changed or dropped the message `origin`
    (measured against the transcript, so a persistent rewrite is named by its stage)."""
    before = _find(call.raw_history, origin)
    for run in call.stages:
        after = _find(run.history, origin)
        if after is None:
            return run.stage
        if before is not None and not same(before, after):
            return run.stage
        before = after
    return ""


def _injector(message: Message) -> str:
    # Only two things inject messages: pairing (a synthetic tool result) and the anchor (a
    # system message appended to every outgoing copy, so it moves as the history grows).
    return "pairing" if message.role == "tool" else "anchor"


def explain_break(call: CallResult, prev: Message, position: int,
                  sent_origins: Container[int | None] | None = None) -> BreakCause:
    """Say why `call.sent` does not extend the previous prompt at `position` (their first
    difference), where that prompt held `prev`.

    A rewrite already in the persistent history at this call (done at an earlier call) reports
    "earlier call" as its stage. `sent_origins`: the origins `call.sent` holds, when the
    caller keeps them (else they are collected here).
    """
    sent = call.sent
    cur = sent[position] if position < len(sent) else None
    if sent_origins is None:
        sent_origins = {m.origin for m in sent if m.origin is not None}
    if prev.origin is not None and prev.origin not in sent_origins:
        return BreakCause(position, REMOVED, prev.origin,
                          _stage_changing(call, prev.origin) or "earlier call", prev.role)
    if prev.origin is None:
        return BreakCause(position, INJECTED, None, _injector(prev), prev.role)
    if cur is None:
        return BreakCause(position, REMOVED, prev.origin, "", prev.role)
    if cur.origin is None:
        return BreakCause(position, INJECTED, None, _injector(cur), cur.role)
    raw = _find(call.raw_history, cur.origin)
    if cur.origin != prev.origin:
        return BreakCause(position, REORDERED, cur.origin, "", cur.role)
    if raw is not None and not same(raw, cur):
        stage = _stage_changing(call, cur.origin) or "earlier call"
        return BreakCause(position, REWRITTEN, cur.origin, stage, cur.role)
    return BreakCause(position, RESTORED, cur.origin, "", cur.role)
