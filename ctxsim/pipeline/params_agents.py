"""Parameters of the agent stages (SPEC-agents §2.5): Claude Code, Codex CLI, OpenHands and
Anthropic's server-side edits and compaction.

They are `ParamSpec`s like the others and go into the one `PARAMS` table of `params.py`, after
the gateway and ChatCLI parameters, in the order the thresholds form shows them; `params.py`
imports this module so the table is whole whichever of the two loads first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .agent_settings import CLAUDE_ENV_KEYS
from .params import PARAMS, ParamSpec, Validator, _choice, _opt_string, _string, _string_list

# --- SPEC-agents §2.5: Claude Code, Anthropic server edits, and the shared maps -------------

# Who does not document the defaults ctxsim chose for them ([X], SPEC-agents §2.5.0.1).
ANTHROPIC = "Anthropic"
ANY_TOOL = "any tool"  # no tool documents it (the placeholder summary's size, §2.5.0.6)


class _IntRange:
    """An integer validator between `lo` and `hi`; `bounds` lets a form render min and max."""

    def __init__(self, lo: int, hi: int):
        self.bounds = (lo, hi)

    def __call__(self, v: Any) -> int:
        lo, hi = self.bounds
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError("expected an integer")
        if not lo <= v <= hi:
            raise ValueError(f"must be between {lo} and {hi}")
        return v


def _int_range(lo: int, hi: int) -> Validator:
    return _IntRange(lo, hi)


def _opt_int_range(lo: int, hi: int) -> Validator:
    inner = _int_range(lo, hi)
    return lambda v: None if v is None else inner(v)


def _number(lo: float, hi: float, low_open: bool = False) -> Validator:
    def check(v: Any) -> float | int:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            raise ValueError("expected a number")
        if v > hi or v < lo or (low_open and v == lo):
            raise ValueError(f"must be {'above' if low_open else 'at least'} {lo} and at most {hi}")
        return v

    return check


def _boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError("expected true or false")
    return v


def _names(v: Any) -> tuple[str, ...]:
    names = _string_list(v)
    if not names or not all(names):
        raise ValueError("expected a non-empty list of tool names")
    return names


def _persist_overrides(v: Any) -> dict[str, int | None]:
    if not isinstance(v, Mapping):
        raise ValueError("expected an object mapping tool names to an integer or null")
    out: dict[str, int | None] = {}
    for k, x in v.items():
        if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 1):
            raise ValueError(f"{k}: expected an integer of at least 1, or null (never persist)")
        out[k] = x
    return out


def _thinking_keep(v: Any) -> Any:
    if v == "all":
        return "all"
    if (not isinstance(v, Mapping) or set(v) != {"type", "value"}
            or v["type"] != "thinking_turns"):
        raise ValueError('expected "all" or {"type": "thinking_turns", "value": N}')
    n = v["value"]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100000:
        raise ValueError("value must be an integer between 1 and 100000")
    return {"type": "thinking_turns", "value": n}


def _compact_trigger(v: Any) -> dict[str, Any]:
    if (not isinstance(v, Mapping) or set(v) != {"type", "value"}
            or v["type"] != "input_tokens"):
        raise ValueError('expected {"type": "input_tokens", "value": N}')
    n = v["value"]
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError("value must be an integer")
    if n < 50000:
        raise ValueError("compact_trigger.value must be at least 50000 (the API rejects "
                         "smaller triggers)")
    if n > 10_000_000:
        raise ValueError("value must be at most 10000000")
    return {"type": "input_tokens", "value": n}


def _claude_env(v: Any) -> dict[str, str]:
    from .agent_settings import clean_claude_env

    return clean_claude_env(v)


def _codex_config(v: Any) -> dict[str, Any]:
    from .agent_settings import clean_codex_config

    return clean_codex_config(v)


CC_MICROCOMPACT_TOOLS = ("Read", "Bash", "PowerShell", "Grep", "Glob", "WebSearch", "WebFetch",
                         "Edit", "Write")
CC_TOOL_RESULTS_DIR = "~/.claude/projects/{project}/{session_id}/tool-results"

PARAMS.update({
    p.name: p
    for p in (
        ParamSpec("claude_env", "Claude Code env", {}, "The env block of Claude Code's "
                  "settings.json as a JSON object of strings; keys: "
                  + ", ".join(CLAUDE_ENV_KEYS) + ". Each is read the way a JavaScript program "
                  "usually reads it (parse rules are ctxsim's; not documented by Anthropic). "
                  "Empty: none set.", _claude_env, kind="json",
                  example='{"BASH_MAX_OUTPUT_LENGTH": "60000", "DISABLE_AUTO_COMPACT": "1"}'),
        ParamSpec("codex_config", "Codex config", {}, "Top-level keys of ~/.codex/config.toml, "
                  "in TOML, one a line: model (a quoted string), tool_output_token_limit, "
                  "model_context_window, model_auto_compact_token_limit (integers). Empty: "
                  "Codex's defaults.", _codex_config, kind="toml",
                  example='model_auto_compact_token_limit = 60000\nmodel = "gpt-5-codex"'),
        ParamSpec("summary_placeholder_tokens", "Placeholder summary size", 2000, "Size of the "
                  "summary ctxsim inserts when a compaction has no recorded summary.",
                  _int_range(0, 200000),
                  unit="tokens", undocumented_by=ANY_TOOL),
        # claude_code_tool_output (§2.5.1)
        ParamSpec("cc_bash_mode", "Bash over the cap", "persist", "persist: saved to a file, "
                  "the model gets a preview (current versions); middle: head and tail kept "
                  "(2025 versions).", _choice("persist", "middle"), kind="choice",
                  choices=("persist", "middle")),
        ParamSpec("cc_bash_tools", "Shell tools", ("Bash", "PowerShell"), "Tools "
                  "BASH_MAX_OUTPUT_LENGTH applies to.", _names, kind="list",
                  undocumented_by=ANTHROPIC),
        ParamSpec("cc_bash_persist_trim", "Trim persisted Bash output", True, "Leading blank "
                  "lines and trailing white space stay out of the preview.",
                  _boolean, kind="bool", choices=("true", "false"), undocumented_by=ANTHROPIC),
        ParamSpec("cc_mcp_mode", "MCP over the cap", "truncate", "truncate (current versions) "
                  "or error (2025 versions).", _choice("truncate", "error"), kind="choice",
                  choices=("truncate", "error")),
        ParamSpec("cc_mcp_truncation_notice", "MCP truncation notice",
                  "\n\n[ctxsim: MCP output truncated at {max} tokens]", "Text appended to a "
                  "truncated MCP result; {max} is the limit (ctxsim's text).", _string,
                  kind="text", undocumented_by=ANTHROPIC),
        ParamSpec("cc_mcp_precheck_factor", "MCP rough pre-check", 0, "0: count every MCP "
                  "result; f > 0: leave alone a result whose rough estimate is at most f × the "
                  "limit.", _number(0, 1), kind="number", undocumented_by=ANTHROPIC),
        ParamSpec("cc_persist_threshold_chars", "Persist threshold", 50000, "Results longer "
                  "than this (UTF-16 units) are saved to a file and previewed; empty: never "
                  "(releases before 2.1.2).",
                  _opt_int_range(1, 10_000_000), unit="chars", kind="optional-int"),
        ParamSpec("cc_persist_overrides", "Per-tool persist thresholds", {"Read": None},
                  "Tool name → threshold, or null to never persist (Read by default).",
                  _persist_overrides, kind="limits", undocumented_by=ANTHROPIC),
        ParamSpec("cc_tool_results_dir", "Tool results folder", CC_TOOL_RESULTS_DIR, "Where "
                  "persisted results are saved; {project} and {session_id} are substituted.",
                  _string, kind="string"),
        ParamSpec("cc_preview_cut", "Preview cut", "newline", "newline: the 2000-unit preview "
                  "ends at its last line break past unit 1000; exact: always at 2000.",
                  _choice("newline", "exact"), kind="choice", choices=("newline", "exact"),
                  undocumented_by=ANTHROPIC),
        ParamSpec("cc_read_cap", "Read token cap", False, "Apply "
                  "CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS to recorded Read results (off: they "
                  "are already capped).", _boolean, kind="bool", choices=("true", "false"),
                  undocumented_by=ANTHROPIC),
        # claude_code_microcompact (§2.5.2)
        ParamSpec("cc_microcompact_trigger", "Microcompact trigger", "time", "time: after an "
                  "idle gap; count: over a number of results; recorded: the transcript's "
                  "markers; off.", _choice("time", "count", "recorded", "off"),
                  kind="choice", choices=("time", "count", "recorded", "off"),
                  undocumented_by=ANTHROPIC),
        ParamSpec("cc_microcompact_gap_minutes", "Idle gap", 60, "Minutes since the last "
                  "assistant message that make old results be cleared.",
                  _number(0, 10080, low_open=True), unit="minutes", kind="number",
                  undocumented_by=ANTHROPIC),
        ParamSpec("cc_microcompact_keep_recent", "Keep recent results", 5, "The most recent "
                  "results kept (at least 1).", _int_range(0, 10000), unit="results"),
        ParamSpec("cc_microcompact_count_trigger", "Count trigger", 12, "count trigger: fires "
                  "when more results than this are uncleared.",
                  _int_range(1, 100000), unit="results", undocumented_by=ANTHROPIC),
        ParamSpec("cc_microcompact_tools", "Cleared tools", CC_MICROCOMPACT_TOOLS, "Tools whose "
                  "old results are cleared.", _string_list, kind="list",
                  undocumented_by=ANTHROPIC),
        ParamSpec("cc_microcompact_placeholder", "Cleared placeholder",
                  "[Old tool result content cleared]", "Text of a cleared result.", _string,
                  kind="string"),
        # claude_code_autocompact (§2.5.3)
        ParamSpec("cc_model", "Model", None, "Model id for the window table; empty: the "
                  "session's model.", _opt_string, kind="optional-string"),
        ParamSpec("cc_context_window", "Context window", None, "Empty: from the model table.",
                  _opt_int_range(1, 10_000_000), unit="tokens", kind="optional-int"),
        ParamSpec("cc_max_output_tokens", "Max output", None, "Empty: from the model table.",
                  _opt_int_range(1, 1_000_000), unit="tokens", kind="optional-int"),
        ParamSpec("cc_autocompact_buffer_tokens", "Safety buffer", 13000, "Tokens below the "
                  "effective window where auto-compaction fires (users' reading of the CLI).",
                  _int_range(0, 1_000_000), unit="tokens"),
        ParamSpec("cc_summary_reserve_tokens", "Summary reserve", 20000, "Part of the window "
                  "kept free for the summary, at most the model's output limit.",
                  _int_range(0, 1_000_000), unit="tokens", undocumented_by=ANTHROPIC),
        ParamSpec("cc_autocompact_mode", "Auto-compact mode", "predict", "predict: fire at the "
                  "threshold; recorded: replay the transcript's compactions.",
                  _choice("predict", "recorded"), kind="choice",
                  choices=("predict", "recorded"), undocumented_by=ANTHROPIC),
        ParamSpec("cc_token_source", "Token source", "anchored", "anchored: the provider's "
                  "tokens (the recorded bill of this call or the latest earlier one, plus what "
                  "the profile changed since; the counter without usage); counter: the "
                  "profile's counter on the full prompt; usage: the last recorded usage plus a "
                  "rough estimate of what followed.", _choice("anchored", "counter", "usage"),
                  kind="choice", choices=("anchored", "counter", "usage"),
                  undocumented_by=ANTHROPIC),
        ParamSpec("cc_summary_template", "Summary wording", "v2", "v2: 2026 transcripts; v1: "
                  "2025 transcripts.", _choice("v2", "v1"), kind="choice", choices=("v2", "v1")),
        # clear_thinking (§2.5.7)
        ParamSpec("thinking_keep", "Keep thinking", {"type": "thinking_turns", "value": 1},
                  'thinking_turns: the thinking of the N most recent turns that have thinking is '
                  'kept (N from 1); all: every turn\'s thinking is kept (the number is not '
                  'used).',
                  _thinking_keep, kind="object", choices=("thinking_turns", "all"),
                  unit="thinking turns"),
        # anthropic_compact (§2.5.8)
        ParamSpec("compact_trigger", "Compaction trigger", {"type": "input_tokens",
                                                           "value": 150000},
                  "The server compacts when the input is over this many tokens (at least "
                  "50000).", _compact_trigger, kind="object", choices=("input_tokens",),
                  unit="tokens"),
        ParamSpec("compact_instructions", "Summary instructions", None, "Replaces the default "
                  "summarization prompt (exported only: no model runs).", _opt_string,
                  kind="optional-text"),
        ParamSpec("compact_pause_after_compaction", "Pause after compaction", False, "Return "
                  "the compaction block to the client (exported only).", _boolean,
                  kind="bool", choices=("true", "false")),
        ParamSpec("anthropic_compact_mode", "Compaction mode", "predict", "predict: fire at the "
                  "trigger; recorded: replay the transcript's compaction blocks.",
                  _choice("predict", "recorded"), kind="choice",
                  choices=("predict", "recorded")),
    )
})


# --- Codex CLI and OpenHands (SPEC-agents §2.5.4–§2.5.6) ---------------------------------------


def _nonempty_strings(v: Any) -> tuple[str, ...]:
    items = _string_list(v)
    if not all(items):
        raise ValueError("expected non-empty strings")
    return items


def _truncation_policy(v: Any) -> dict[str, Any] | None:
    if v is None:
        return None
    if not isinstance(v, Mapping) or set(v) != {"mode", "limit"}:
        raise ValueError('expected {"mode": "bytes"|"tokens", "limit": N} or null')
    if v["mode"] not in ("bytes", "tokens"):
        raise ValueError('mode must be "bytes" or "tokens"')
    try:
        limit = _int_range(0, 100_000_000)(v["limit"])
    except ValueError as exc:
        raise ValueError(f"limit: {exc}") from None
    return {"mode": v["mode"], "limit": limit}


# OpenHands `[condenser]` tables (openhands/core/config/condenser_config.py): per type, each
# field's default and lower bound (None: any integer; "str": a string).
CONDENSER_FIELDS: dict[str, dict[str, tuple[Any, Any]]] = {
    "noop": {},
    "observation_masking": {"attention_window": (100, 1)},
    "recent": {"keep_first": (1, 0), "max_events": (100, 1)},
    "amortized": {"max_size": (100, 2), "keep_first": (1, 0)},
    "conversation_window": {},
    "llm": {"llm_config": (None, "str"), "keep_first": (1, 0), "max_size": (100, 2),
            "max_event_length": (10_000, None)},
    "structured": {"llm_config": (None, "str"), "keep_first": (1, 0), "max_size": (100, 2),
                   "max_event_length": (10_000, None)},
    "llm_attention": {"llm_config": (None, "str"), "max_size": (100, 2), "keep_first": (1, 0)},
    "browser_output_masking": {"attention_window": (1, 1)},
    "pipeline": {},
}
ROLLING_CONDENSERS = ("amortized", "conversation_window", "llm", "structured", "llm_attention")


def condenser_config(v: Any, where: str = "") -> dict[str, Any]:
    """One `[condenser]` table, validated like OpenHands' pydantic models (extra keys forbidden,
    same bounds); the result has every field, defaults filled in, `type` first."""
    at = f"{where}." if where else ""
    if not isinstance(v, Mapping):
        raise ValueError(f"{where or 'condenser'}: expected an object with a type")
    kind = v.get("type", "noop")
    if kind not in CONDENSER_FIELDS:
        raise ValueError(f"{at}type: unknown condenser type {kind!r} "
                         f"(known: {', '.join(CONDENSER_FIELDS)})")
    fields = CONDENSER_FIELDS[kind]
    extra = [k for k in v if k != "type" and k not in fields
             and not (kind == "pipeline" and k == "condensers")]
    if extra:
        raise ValueError(f"{at}{extra[0]}: not a field of the {kind} condenser")
    out: dict[str, Any] = {"type": kind}
    if kind == "pipeline":
        members = v.get("condensers", [])
        if not isinstance(members, list):
            raise ValueError(f"{at}condensers: expected a list of condenser tables")
        out["condensers"] = [
            condenser_config(m, f"{at}condensers[{n}]") for n, m in enumerate(members)
        ]
        return out
    for name, (default, low) in fields.items():
        value = v.get(name, default)
        if low == "str":
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{at}{name}: expected the name of an [llm.*] section")
        elif isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{at}{name}: expected an integer")
        elif low is not None and value < low:
            raise ValueError(f"{at}{name}: must be {low} or more")
        if value is not None:
            out[name] = value
    if "keep_first" in out and "max_size" in out and out["keep_first"] >= out["max_size"] // 2:
        raise ValueError(f"{at}keep_first: must be less than max_size // 2 "
                         f"({out['max_size'] // 2})")
    return out


def _condenser(v: Any) -> dict[str, Any]:
    return condenser_config(v)


CODEX_CONTEXTUAL_PREFIXES = ("<environment_context>", "<user_instructions>",
                             "# AGENTS.md instructions for ", "<user_shell_command>", "<skill>",
                             "<turn_aborted>")

PARAMS.update({p.name: p for p in (
    ParamSpec("codex_truncation_policy", "Truncation policy", None, "The model catalog's "
              "truncation_policy: a tool output is cut to this many bytes or tokens; none: "
              "the rollout's recorded policy, else the model table.", _truncation_policy,
              kind="object", choices=("bytes", "tokens"), pair=("mode", "limit")),
    ParamSpec("codex_output_truncation", "Where outputs are cut", "history", "history: every "
              "output is cut as it enters the history, the rollout keeps it whole (Codex 0.56 "
              "and later); rollout: the tool cut it before the rollout recorded it, so it is "
              "left as recorded (before 0.56).", _choice("history", "rollout"), kind="choice",
              choices=("history", "rollout")),
    ParamSpec("codex_use_recorded_policy", "Use recorded policy", True, "Use the policy the "
              "rollout's turn_context recorded (what Codex used) before the model table.",
              _boolean, kind="bool", choices=("true", "false")),
    ParamSpec("codex_autocompact_mode", "Codex compaction", "predict", "predict: compact when "
              "the limit is reached (recorded summaries used where they exist); recorded: "
              "replay the rollout's compactions only.", _choice("predict", "recorded"),
              kind="choice", choices=("predict", "recorded")),
    ParamSpec("codex_limit_semantics", "Configured limit", "min", "min: "
              "model_auto_compact_token_limit can only lower 90 % of the window (newer Codex); "
              "override: it replaces it (older Codex).", _choice("min", "override"),
              kind="choice", choices=("min", "override")),
    ParamSpec("codex_token_source", "Codex token source", "anchored", "anchored: the "
              "provider's tokens (the recorded bill of this call or the latest earlier one, "
              "plus what the profile changed since; the counter without usage); counter: the "
              "full prompt under ctxsim's counter; usage: the last recorded total_tokens plus "
              "⌈bytes/4⌉ of what followed (Codex's own estimate).",
              _choice("anchored", "counter", "usage"), kind="choice",
              choices=("anchored", "counter", "usage")),
    ParamSpec("codex_user_message_budget", "User messages kept", 20000, "Approximate tokens of "
              "the most recent user messages kept after a compaction "
              "(COMPACT_USER_MESSAGE_MAX_TOKENS).", _int_range(0, 10_000_000), unit="tokens"),
    ParamSpec("codex_contextual_prefixes", "Contextual prefixes", CODEX_CONTEXTUAL_PREFIXES,
              "User messages starting with one of these are injected context, not the "
              "human's requests; one a line, kept as typed (spaces too).", _nonempty_strings,
              kind="lines"),
    ParamSpec("openhands_condenser_config", "OpenHands condenser", {"type": "noop"}, "The "
              "[condenser] table of OpenHands config.toml as a JSON object: its type and that "
              "type's fields ("
              + "; ".join(f"{kind}: {', '.join(fields) or 'no fields'}"
                          for kind, fields in CONDENSER_FIELDS.items() if kind != "pipeline")
              + '; pipeline: "condensers", a list of such objects). Fields left out take '
              "OpenHands' defaults; empty: noop.",
              _condenser, kind="json", choices=tuple(CONDENSER_FIELDS),
              example='{"type": "recent", "keep_first": 1, "max_events": 10}'),
    ParamSpec("openhands_max_message_chars", "Max message chars", 30000, "[llm] "
              "max_message_chars: observations longer than this are cut in the middle "
              "(negative: off).", _int_range(-1, 100_000_000), unit="characters"),
    ParamSpec("openhands_assembly", "Message assembly", "v0", "v0: OpenHands' own conversion "
              "of events into messages; plain: the kept messages in their order.",
              _choice("v0", "plain"), kind="choice", choices=("v0", "plain")),
    ParamSpec("openhands_request_over_tokens", "Condensation request over", None, "A "
              "condensation request is raised when the assembled prompt is over this many "
              "tokens (standing in for the LLM's context-window error); empty: never.",
              _opt_int_range(1, 10_000_000), unit="tokens", kind="optional-int"),
    ParamSpec("openhands_mode", "OpenHands condensation", "predict", "predict: condense as "
              "the configured condenser would; recorded: replay the recorded condensation "
              "events.", _choice("predict", "recorded"), kind="choice",
              choices=("predict", "recorded")),
)})


# Part 2 (SPEC-agents-2) follows these in the form; importing it here makes the table whole.
from . import params_agents2  # noqa: E402, F401
