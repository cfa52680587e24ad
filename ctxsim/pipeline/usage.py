"""Recorded usage (SPEC §11): what the provider billed for each model call.

A call's `recorded` is `{total_input, input, cache_read, cache_write, output, reasoning}` with
absent fields None, or None when the file has no usage for the response that answered it.
Importers normalize each provider's usage with the functions below and store the result on the
answering assistant message as `meta["recorded"]`; the replay makes one model call before each
assistant message, so `call_recorded` finds a call's usage through `response_input_index`. The
trailing call (after the last message) is never answered in the transcript.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .messages import Message

FIELDS = ("total_input", "input", "cache_read", "cache_write", "output", "reasoning")
NEXT_CALL_LABEL = "next call (not in the transcript)"

Recorded = dict[str, int | None]


def _int(value: Any) -> int | None:
    if type(value) is int:  # the common case, first (bool is a subclass of int)
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _nested(usage: Mapping[str, Any], key: str, inner: str) -> int | None:
    details = usage.get(key)
    return _int(details.get(inner)) if isinstance(details, Mapping) else None


def _record(total_input: int | None, input: int | None, cache_read: int | None,
            cache_write: int | None, output: int | None, reasoning: int | None) -> Recorded | None:
    if total_input is None:
        return None
    return {"total_input": total_input, "input": input, "cache_read": cache_read,
            "cache_write": cache_write, "output": output, "reasoning": reasoning}


def anthropic_recorded(usage: Any) -> Recorded | None:
    """Anthropic Messages usage: `input_tokens` excludes both cache fields, so the context the
    model read is their sum."""
    if not isinstance(usage, Mapping):
        return None
    fresh = _int(usage.get("input_tokens"))
    read = _int(usage.get("cache_read_input_tokens"))
    write = _int(usage.get("cache_creation_input_tokens"))
    if fresh is None and read is None and write is None:
        return None
    total = (fresh or 0) + (read or 0) + (write or 0)
    return _record(total, fresh, read, write, _int(usage.get("output_tokens")), None)


def openai_recorded(usage: Any) -> Recorded | None:
    """OpenAI Chat (`prompt_tokens`) or Responses (`input_tokens`) usage; both include the
    cached tokens. LiteLLM-style logs of Anthropic models may add Anthropic's cache fields."""
    if not isinstance(usage, Mapping):
        return None
    if "prompt_tokens" in usage:
        total = _int(usage.get("prompt_tokens"))
        cached = _nested(usage, "prompt_tokens_details", "cached_tokens")
        output = _int(usage.get("completion_tokens"))
        reasoning = _nested(usage, "completion_tokens_details", "reasoning_tokens")
    else:
        total = _int(usage.get("input_tokens"))
        cached = _nested(usage, "input_tokens_details", "cached_tokens")
        output = _int(usage.get("output_tokens"))
        reasoning = _nested(usage, "output_tokens_details", "reasoning_tokens")
    anthropic_read = _int(usage.get("cache_read_input_tokens"))
    if anthropic_read is not None and (cached is None or anthropic_read > cached):
        cached = anthropic_read  # LiteLLM logs of Anthropic models
    write = _int(usage.get("cache_creation_input_tokens"))
    fresh = None if total is None else total - (cached or 0) - (write or 0)
    return _record(total, fresh, cached, write, output, reasoning)


def codex_recorded(usage: Any) -> Recorded | None:
    """A Codex `token_count` event's `last_token_usage` (`input_tokens` includes
    `cached_input_tokens`)."""
    if not isinstance(usage, Mapping):
        return None
    total = _int(usage.get("input_tokens"))
    cached = _int(usage.get("cached_input_tokens"))
    fresh = None if total is None else total - (cached or 0)
    return _record(total, fresh, cached, None, _int(usage.get("output_tokens")),
                   _int(usage.get("reasoning_output_tokens")))


def message_recorded(message: Message | None) -> Recorded | None:
    if message is None or message.role != "assistant":
        return None
    recorded = message.meta.get("recorded")
    return dict(recorded) if isinstance(recorded, Mapping) else None


def call_recorded(messages: Sequence[Message], response_input_index: int | None
                  ) -> Recorded | None:
    """The recorded usage of the call answered by `messages[response_input_index]`; None for
    the trailing call and for calls the file has no usage for."""
    if response_input_index is None or not 0 <= response_input_index < len(messages):
        return None
    return message_recorded(messages[response_input_index])


def recorded_per_call(messages: Sequence[Message]) -> list[Recorded | None]:
    """One entry per assistant message, i.e. per model call the transcript answers, in order."""
    return [message_recorded(m) for m in messages if m.role == "assistant"]


def session_totals(recorded: Sequence[Recorded | None]) -> dict[str, Any] | None:
    """Sums over the calls with usage, the share of input read from the cache, and the
    largest prompt billed (`peak_input`: a window is at least that large)."""
    present = [r for r in recorded if r]
    if not present:
        return None
    totals: dict[str, Any] = {"calls": len(present)}
    for key in FIELDS:
        values = [v for r in present if (v := r.get(key)) is not None]
        totals[key] = sum(values) if values else None
    totals["peak_input"] = max((v for r in present if isinstance(v := r.get("total_input"), int)),
                               default=None)
    total_input = totals["total_input"] or 0
    totals["cache_read_share"] = (
        round((totals["cache_read"] or 0) / total_input, 4) if total_input else None
    )
    return totals


def provider_family(format: str, model: str | None = None) -> str | None:
    """"anthropic" or "openai" from the model name when there is one, else from the format;
    None when neither tells."""
    name = (model or "").lower()
    if "claude" in name or "anthropic" in name:
        return "anthropic"
    if any(part in name for part in ("gpt", "o1", "o3", "o4", "codex", "openai")):
        return "openai"
    if format in ("claude-code", "anthropic-messages"):
        return "anthropic"
    if format in ("codex", "codex-legacy", "codex-exec", "openai-chat", "openai-responses"):
        return "openai"
    return None


def guess_provider(messages: Sequence[Message]) -> str | None:
    """The provider family a history shows on its own (a model name, an image's provider),
    for callers that have no session at hand."""
    for m in messages:
        model = m.meta.get("model")
        if isinstance(model, str) and (family := provider_family("", model)):
            return family
        for part in m.meta.get("binary_parts", ()) or ():
            if part.get("provider") in ("anthropic", "openai"):
                return part["provider"]
    return None


# Input context windows by model-name prefix, longest prefix first (taken 2026-11 from the
# providers' model pages; Claude's 1M-token window is an opt-in beta, so 200k is shown).
CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("o1", 200_000),
    ("codex-mini", 200_000),
    ("claude", 200_000),
)


def context_window(model: str | None) -> int | None:
    """The model's context window in tokens, when the model is known to the table."""
    if not model:
        return None
    name = model.lower().rsplit("/", 1)[-1]  # "anthropic/claude-…", "openai/gpt-…"
    for prefix, window in sorted(CONTEXT_WINDOWS, key=lambda e: -len(e[0])):
        if name.startswith(prefix):
            return window
    return None
