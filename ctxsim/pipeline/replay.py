"""The replay engine (SPEC §3): the profile's stages before every model call of a transcript.

Calls are yielded lazily, one `CallResult` at a time. Histories are sequences of shared
immutable messages, so a result costs one pointer per message, and only a consumer that keeps every
result (a full trace) holds them all. A call's work is what changed at it, not the length of
the history (issue 21): the raw history is a `Prefix` of one growing list, the persistent
history a `History` whose unchanged chunks every later call shares, and token totals follow
changed positions. Histories are therefore sequences, read like tuples, not always tuples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .bookkeeping import CostCache, Deltas, rewritten
from .calibration import call_estimates, injected_items
from .history import History, Prefix, plus
from .messages import Message, Session
from .profiles import Profile, RunConfig, resolve
from .registry import PHASES, STAGES, instructions_of
from .spill import SpillRecord, SpillService, SpillSink
from .stages import StageContext
from .token_model import TokenModel, anchors_of, estimate_options
from .token_model import build as build_token_model
from .tokens import extras_tokens, get_counter
from .usage import guess_provider


@dataclass
class StageRun:
    """One stage's work at one call: its report and the history it produced."""

    stage: str
    phase: str
    report: dict[str, Any]
    history: Sequence[Message]
    tokens_before: int
    tokens_after: int

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after


@dataclass
class CallResult:
    """Everything a UI needs about one model call."""

    call_index: int
    run_index: int
    loop_turn: int
    response_input_index: int | None
    stages: list[StageRun]
    # What the transcript held up to this call: a read-only window on a list the replay keeps
    # appending to (a `Prefix`: indexing, slices, iteration, equality like a tuple's).
    raw_history: Sequence[Message]
    persistent: Sequence[Message]
    sent: Sequence[Message]
    spills: list[SpillRecord]
    raw_tokens: int
    sent_tokens: int
    error: str | None = None
    persistent_tokens: int = 0
    # Saved before this call's stages ran: dispatch caps and earlier persistent rewrites.
    carried_over: int = 0
    # The part of `carried_over` that dispatch stages (ChatCLI's per-tool cap) saved, in all
    # and by stage.
    dispatch_saved: int = 0
    dispatch_savings: Mapping[str, int] = field(default_factory=dict)
    # The history this call's stages started from: what earlier calls kept, plus the new
    # messages (dispatch caps applied). Shares its messages with the other histories.
    input_history: Sequence[Message] = ()
    # How many leading messages of `sent` are the very objects the previous call sent (a lower
    # bound: past it they may still be equal); None when a stage changed a length, so the
    # replay cannot tell. Lets a consumer of consecutive prompts (the cache simulation) look
    # at what changed only.
    sent_kept: int | None = None
    # Context the agent injected since the previous call that the transcript records beside
    # its messages (Claude Code's attachment records, `calibration.injected_items`): in what
    # was billed, in no message.
    injected: Sequence[Mapping[str, Any]] = ()

    @property
    def savings(self) -> dict[str, int]:
        return {s.stage: s.saved for s in self.stages}


def _counted_parts(messages: Sequence[Message]) -> Iterator[bytes]:
    """The long parts the token formula counts of each message: contents and arguments."""
    for m in messages:
        yield m.content
        for call in m.tool_calls:
            yield call.arguments.encode("utf-8", "surrogatepass")


@dataclass
class Replay:
    """A replay of `messages` under `config`. Iterate `calls()` once, lazily."""

    messages: Sequence[Message]
    config: RunConfig
    sink: SpillSink | None = None
    tools: Any = None
    response_schema: Any = None
    dispatch: list[dict[str, Any]] = field(default_factory=list)
    final_history: tuple[Message, ...] = ()
    use_memos: bool = True
    # The session's `meta` (SPEC-agents §2.5.0.8), handed to every stage as `ctx.session`.
    session: Any = None
    # SPEC §11's token model, built when the calls start (`token_model`); off, every stage
    # compares ctxsim's own count (the bench's baseline). `agent`: the transcript format,
    # which picks the pooled prior of a session without usage.
    use_token_model: bool = True
    agent: str | None = None

    def __post_init__(self) -> None:
        self.spills = SpillService(self.sink)
        self.counter = get_counter(self.config.values["counter"])
        self.image_rule = self.config.values.get("image_rule", "auto")
        self._costs = CostCache(self.counter, self.image_rule)
        # A message's tokens as this replay measures them (by identity: a message it already
        # measured is looked up, never counted again); `costs`, of many at once (a call view
        # weighs every row). The cost cache's own methods, not the replay's: a call view kept
        # on the replay (the web's view memo) holds them, and through a method of the replay
        # made a cycle, so a dropped replay waited for a full collection (issue 31).
        self.cost: Callable[[Message], int] = self._costs.cost
        self.costs: Callable[[list[Message]], list[int]] = self._costs.each
        self._deltas = Deltas()
        # slot -> the history a stage returned at the previous call and its tokens
        self._made: dict[int, tuple[Sequence[Message], int]] = {}
        self.dispatch_saved = 0
        self._dispatch_savings: dict[str, int] = {}
        gateway_si = instructions_of(self.config.stages, self.config.values)
        # Memos let stages skip work redone at every call; `use_memos=False` turns them off
        # (tests compare both ways).
        self.memos: dict[str, dict[str, Any]] | None = {} if self.use_memos else None
        anchor = self.config.values.get("anchor_text")
        # One anchor object for the whole replay, so later calls see the same message.
        self.anchor = Message.of("system", anchor) if anchor is not None else None
        self.extra_tokens = extras_tokens(
            self.counter, gateway_si, self.tools, self.response_schema
        )
        self.token_model: TokenModel | None = None

    @property
    def measured(self) -> Mapping[int, tuple[Message, int]]:
        """Every message this replay measured, with its tokens, by object id in the order
        measured: its cost cache, which keeps each of them alive (what a cache of paused
        replays accounts for)."""
        return self._costs._costs

    @property
    def spilled_files(self) -> list[SpillRecord]:
        return self.spills.records

    def build_token_model(self) -> TokenModel:
        """The session's token model under this replay's counter and image rule: a pass over
        the raw history (each content a cache lookup once the replay counted it)."""
        session = self.session or {}
        points = call_estimates(self.messages, self.counter, self.image_rule, self.tools,
                                self.response_schema, **estimate_options(self.agent, session))
        provider = session.get("provider") or guess_provider(self.messages)
        model = build_token_model(points, self.counter.name, provider, self.agent)
        if model.method == "anchored":
            if self.image_rule != "bytes4" and any(m.meta.get("binary_parts")
                                                   for m in self.messages):
                points = call_estimates(self.messages, self.counter, "bytes4", self.tools,
                                        self.response_schema)
            model.stage_anchors = anchors_of(points, reasoning=False)
        return model

    def calls(self) -> Iterator[CallResult]:
        """Yield one result per model call (SPEC §1), in order.

        Invariant: persistent-phase effects carry to later calls; outgoing and gateway effects
        never do; a failed call (context_overflow) is yielded and the replay goes on.
        """
        values = self.config.values
        # Every raw content is counted below; a cold counter learns them all at once, over
        # the machine's cores when there are enough (issue 21, `token_pool`).
        count_many = getattr(self.counter, "count_many", None)
        if count_many is not None:
            count_many(_counted_parts(self.messages))
        if self.use_token_model and self.token_model is None:
            self.token_model = self.build_token_model()
        agent_mode = values["loop_mode"] == "agent"
        dispatch_stages = [s for s, p in self.config.stages if p == "dispatch"]
        persistent = History()
        persistent_tokens = 0
        # Where the latest assistant message sits in `persistent`: a dispatch stage sees the
        # history from there on, which is all a result entering the history can depend on.
        latest_assistant = 0
        raw: list[Message] = []
        raw_tokens = self.extra_tokens
        # Reasoning items sent back within the current user turn (SPEC §11), by origin.
        reasoning: dict[int, int] = {}
        state = {"call": 0, "run": 0, "turn": 0}
        last_persistent: Sequence[Message] | None = None
        injected: list[dict[str, Any]] = []
        for idx, src in enumerate(self.messages):
            msg = src if src.origin is not None else replace(src, origin=idx)
            if "injected_context" in msg.meta:
                injected += injected_items(msg.meta["injected_context"], self.counter)
            if msg.role == "assistant":
                result = self._call(persistent, persistent_tokens, raw, raw_tokens, state, idx,
                                    reasoning, injected)
                injected = []
                persistent = History.of(result.persistent)
                persistent_tokens = result.persistent_tokens
                yield result
                spent = msg.meta.get("reasoning_tokens")
                if isinstance(spent, int) and spent > 0:
                    reasoning[idx] = spent
                latest_assistant = len(persistent)
                persistent = persistent.append(msg)
                persistent_tokens += self._costs.cost(msg)
                if agent_mode and not msg.tool_calls:
                    state["run"] += 1
                    state["turn"] = 0
                else:
                    state["turn"] += 1
                state["call"] += 1
            else:
                entering = msg
                if msg.role == "user" and reasoning:
                    reasoning = {}  # reasoning is not sent back past the next user message
                if msg.role == "tool":
                    for stage in dispatch_stages:
                        ctx = StageContext(values, self.counter, state["turn"], state["call"],
                                           self.spills, self.tools, self.response_schema,
                                           session=self.session or {},
                                           token_model=self.token_model)
                        r = STAGES[stage].run([*persistent[latest_assistant:], msg], ctx)
                        if r.history[-1] is not msg:
                            saved = self._costs.cost(msg) - self._costs.cost(r.history[-1])
                            self._dispatch_savings[stage] = (
                                self._dispatch_savings.get(stage, 0) + saved)
                        msg = r.history[-1]
                        self.dispatch.append({"input_index": idx, **r.report})
                persistent = persistent.append(msg)
                persistent_tokens += self._costs.cost(msg)
                if msg is not entering:
                    self.dispatch_saved += self._costs.cost(entering) - self._costs.cost(msg)
            raw.append(src if src.origin is not None else replace(src, origin=idx))
            raw_tokens += self._costs.cost(raw[-1])
        trailing = not self.messages or not (
            self.messages[-1].role == "assistant" and not self.messages[-1].tool_calls
        )
        if trailing:
            result = self._call(persistent, persistent_tokens, raw, raw_tokens, state, None,
                                reasoning, injected)
            last_persistent = result.persistent
            yield result
        self.final_history = tuple(last_persistent if last_persistent is not None else persistent)

    def _call(self, persistent: History, persistent_tokens: int, raw: list[Message],
              raw_tokens: int, state: dict[str, int], response_index: int | None,
              reasoning: dict[int, int] | None = None,
              injected: Sequence[Mapping[str, Any]] = ()) -> CallResult:
        values = self.config.values
        ctx = StageContext(values, self.counter, state["turn"], state["call"], self.spills,
                           self.tools, self.response_schema, session=self.session or {},
                           token_model=self.token_model)
        spill_start = len(self.spills.records)
        history: Sequence[Message] = persistent
        start = persistent
        tokens = persistent_tokens
        runs: list[StageRun] = []
        kept, kept_tokens = history, tokens
        deltas = self._deltas
        deltas.start()
        for phase in PHASES[1:]:
            if phase == "outgoing":
                # The client keeps what the persistent phase produced; the anchor goes only on
                # the outgoing copy, as this phase starts.
                kept, kept_tokens = history, tokens
                if self.anchor is not None:
                    history = plus(history, self.anchor)
                    tokens += self._costs.cost(self.anchor)
            for slot, (stage, p) in enumerate(self.config.stages):
                if p != phase:
                    continue
                if self.memos is not None:
                    ctx.memo = self.memos.setdefault(stage, {})
                    ctx.delta = deltas.delta(slot)
                r = STAGES[stage].run(history, ctx)
                changed = rewritten(history, r.history, r.changed)
                made = self._made.get(slot)
                if (r.since is not None and made is not None and made[0] is r.since.previous
                        and len(r.history) >= len(made[0])):
                    after = self._costs.grown(made[0], r.history, made[1], r.since.positions)
                else:
                    after = self._costs.after(history, r.history, tokens, changed)
                self._made[slot] = (r.history, after)
                runs.append(StageRun(stage, phase, r.report, r.history, tokens, after))
                deltas.ran(slot, phase, history, r.history, changed)
                history, tokens = r.history, after
        sent_kept = deltas.sent_kept()
        deltas.finish(len(kept))
        error = next((s.report["error"] for s in runs if s.report.get("error")), None)
        raw_reasoning = sent_reasoning = 0
        if reasoning:
            raw_reasoning = sum(reasoning.values())
            sent_reasoning = _reasoning_sent(history, reasoning)
        return CallResult(
            call_index=state["call"],
            run_index=state["run"],
            loop_turn=state["turn"],
            response_input_index=response_index,
            stages=runs,
            raw_history=Prefix(raw),
            persistent=kept,
            persistent_tokens=kept_tokens,
            carried_over=raw_tokens - self.extra_tokens - persistent_tokens,
            dispatch_saved=self.dispatch_saved,
            dispatch_savings=dict(self._dispatch_savings),
            sent=history,
            spills=self.spills.records[spill_start:],
            raw_tokens=raw_tokens + raw_reasoning,
            sent_tokens=tokens + self.extra_tokens + sent_reasoning,
            error=error,
            input_history=start,
            sent_kept=sent_kept,
            injected=tuple(injected),
        )


def _reasoning_sent(history: Sequence[Message], reasoning: dict[int, int]) -> int:
    """The recorded reasoning of the assistant messages of the current user turn that are
    still in `history` (a stage may have dropped some). Walks back only to the turn's start."""
    total = 0
    for m in reversed(history):
        if m.role == "user":
            break
        if m.role == "assistant" and m.origin is not None:
            total += reasoning.get(m.origin, 0)
    return total


def replay(
    source: Sequence[Message] | Session,
    profile: str | Profile | RunConfig = "chatcli",
    config: dict[str, Any] | None = None,
    *,
    stages: Any = None,
    sink: SpillSink | None = None,
    tools: Any = None,
    response_schema: Any = None,
    session: Any = None,
    use_token_model: bool = True,
) -> Replay:
    """Prepare a replay: the one way every caller (CLI, web, sweeps, tests) builds a `Replay`.

    `source` is a list of messages or a whole session (whose tools, response schema and
    `meta` then come along, and whose agent release decides the era of a built-in agent
    profile, `RunConfig.for_session`); `profile` is resolved with `config` and `stages`
    (ParamError on bad values) unless it is an already resolved `RunConfig`."""
    if isinstance(profile, RunConfig):
        if config or stages is not None:
            raise TypeError("a resolved RunConfig takes no config or stages")
        run_config = profile
    else:
        run_config = resolve(profile, config, stages)
    agent = None
    if isinstance(source, Session):
        agent = source.format
        tools = source.tools if tools is None else tools
        response_schema = source.response_schema if response_schema is None else response_schema
        session = dict(source.meta) if session is None else session
        run_config = run_config.for_session(source.format, source.meta)
        source = source.messages
    return Replay(source, run_config, sink, tools, response_schema, session=session,
                  use_token_model=use_token_model, agent=agent)
