"""Parameters of the part-2 agent stages (SPEC-agents-2): Gemini CLI, OpenHands V1 (the
software-agent-sdk condenser), Cline, Roo Code, Aider, OpenCode and mini-swe-agent.

Same `ParamSpec`s in the same `PARAMS` table, after the part-1 agents' (`params_agents.py`,
which imports this module). Each help text names the agent's own setting where it has one;
`undocumented_by` marks a default that is ctxsim's choice ([X] in SPEC-agents-2). The
version-dependent defaults are the newest era's; each stage module's `ERAS` gives the older
values (see `stages/_agents2.py`).
"""

from __future__ import annotations

from .params import PARAMS, ParamSpec, _choice, _opt_string, _string, _string_list
from .params_agents import _boolean, _int_range, _number, _opt_int_range

SOURCE_HELP = ("anchored: the provider's tokens (the recorded bill of this call or the latest "
               "earlier one, plus what the profile changed since; the counter without usage); "
               "counter: ctxsim's counter on the prompt about to be sent; usage: the agent's "
               "own figure, the latest recorded usage (counter where none is recorded).")
MODE_HELP = ("predict: compact where the agent would (recorded summaries used where they "
             "exist); recorded: replay the transcript's own compactions only.")


def _source(name: str, label: str) -> ParamSpec:
    return ParamSpec(name, label, "anchored", SOURCE_HELP,
                     _choice("anchored", "counter", "usage"), kind="choice",
                     choices=("anchored", "counter", "usage"))


def _mode(name: str, label: str) -> ParamSpec:
    return ParamSpec(name, label, "predict", MODE_HELP, _choice("predict", "recorded"),
                     kind="choice", choices=("predict", "recorded"))


def _version(name: str, agent: str) -> ParamSpec:
    return ParamSpec(name, f"{agent} version", None, f"The {agent} release whose behaviour "
                     "applies; empty: the version the transcript recorded (else the newest).",
                     _opt_string, kind="optional-string")


def _bool(name: str, label: str, default: bool, help: str) -> ParamSpec:
    return ParamSpec(name, label, default, help, _boolean, kind="bool",
                     choices=("true", "false"))


def _window(name: str, help: str) -> ParamSpec:
    return ParamSpec(name, "Context window", None, help, _opt_int_range(1, 100_000_000),
                     unit="tokens", kind="optional-int")


PARAMS.update({p.name: p for p in (
    # Gemini CLI (SPEC-agents-2 §1)
    _version("gemini_version", "Gemini CLI"),
    _window("gemini_token_limit", "tokenLimit(model): empty = 1,048,576 (Gemma: 256,000)."),
    ParamSpec("gemini_compression_threshold", "Compression threshold", 0.5, "model."
              "compressionThreshold: compress when the last prompt reaches this fraction of "
              "the token limit.", _number(0, 1, low_open=True), kind="number"),
    ParamSpec("gemini_function_response_budget", "Tool-response budget", 50000, "Newest "
              "tool responses kept whole when compressing; older ones are truncated (0: off, "
              "before v0.26).", _int_range(0, 100_000_000), unit="tokens"),
    ParamSpec("gemini_truncate_threshold", "Truncate tool output", 40000, "tools."
              "truncateToolOutputThreshold: longer shell/MCP outputs keep 20 % head + 80 % "
              "tail (≤ 0: off).", _int_range(-1, 100_000_000), unit="chars"),
    ParamSpec("gemini_truncate_mode", "Truncation form", "head_tail", "head_tail (≥ v0.29); "
              "last_lines: the last tools.truncateToolOutputLines lines (v0.3–v0.28).",
              _choice("head_tail", "last_lines"), kind="choice",
              choices=("head_tail", "last_lines")),
    ParamSpec("gemini_truncate_lines", "Lines kept", 1000, "last_lines form: "
              "tools.truncateToolOutputLines.", _int_range(1, 100_000_000), unit="lines"),
    _bool("gemini_mask_enabled", "Tool-output masking", True, "Old tool outputs become "
          "<tool_output_masked> previews (≥ v0.29)."),
    ParamSpec("gemini_mask_protect_tokens", "Masking protects", 50000, "contextManagement."
              "tools.outputMasking.protectionThresholdTokens.", _int_range(0, 100_000_000),
              unit="tokens"),
    ParamSpec("gemini_mask_min_prunable_tokens", "Masking minimum", 30000, "...outputMasking."
              "minPrunableThresholdTokens.", _int_range(0, 100_000_000), unit="tokens"),
    _bool("gemini_mask_protect_latest_turn", "Protect latest turn", True, "...outputMasking."
          "protectLatestTurn."),
    _mode("gemini_mode", "Gemini compression"),
    _source("gemini_token_source", "Gemini token source"),
    # OpenHands V1 tool output and LLMSummarizingCondenser (SPEC-agents-2 §2)
    ParamSpec("openhands_v1_terminal_limit", "Terminal output limit", 30000,
              "MAX_CMD_OUTPUT_SIZE: longer terminal outputs are cut in the middle.",
              _int_range(1, 100_000_000), unit="characters"),
    ParamSpec("openhands_v1_save_dir", "Saved outputs folder",
              "~/.openhands/conversations/{session_id}/observations", "Where the terminal "
              "saves a full output (the conversation's observations folder; {session_id} is "
              "substituted); empty: the short notice, nothing saved.", _string, kind="string",
              undocumented_by="OpenHands"),
    ParamSpec("openhands_v1_max_size", "Max events", 240, "max_size: condense when the view "
              "has more events (the SDK preset uses 80).", _int_range(4, 10_000_000),
              unit="events"),
    ParamSpec("openhands_v1_keep_first", "Keep first", 2, "keep_first: events always kept at "
              "the start (the SDK preset uses 4).", _int_range(0, 10_000_000), unit="events"),
    ParamSpec("openhands_v1_max_tokens", "Token cap", None, "max_tokens: condense when the "
              "view counts more; the agent model's max input tokens caps it too (Claude "
              "200,000, GPT-5 272,000; none when unknown).",
              _opt_int_range(1, 100_000_000), unit="tokens", kind="optional-int"),
    ParamSpec("openhands_v1_minimum_progress", "Minimum progress", 0.1, "minimum_progress: "
              "a condensation must forget this fraction of the view.", _number(0, 1),
              kind="number"),
    _mode("openhands_v1_mode", "OpenHands V1 condensation"),
    _source("openhands_v1_token_source", "OpenHands V1 token source"),
    # Cline classic ContextManager (SPEC-agents-2 §3)
    _window("cline_context_window", "The model's contextWindow; empty: by model (Claude "
            "200,000, else 128,000)."),
    _mode("cline_mode", "Cline truncation"),
    _source("cline_token_source", "Cline token source"),
    # Roo Code (SPEC-agents-2 §4)
    _version("roo_version", "Roo Code"),
    _bool("roo_auto_condense", "Auto-condense", True, "autoCondenseContext."),
    ParamSpec("roo_condense_percent", "Condense at", 100, "autoCondenseContextPercent: "
              "condense when the context reaches this percent of the window.",
              _int_range(5, 100), unit="%"),
    _window("roo_context_window", "The model's contextWindow; empty: by model (Claude "
            "200,000, else 128,000)."),
    ParamSpec("roo_reserved_tokens", "Reserved output", None, "The model's max output "
              "tokens; empty: 8,192 (ANTHROPIC_DEFAULT_MAX_TOKENS).",
              _opt_int_range(0, 100_000_000), unit="tokens", kind="optional-int"),
    ParamSpec("roo_condense_style", "Condense form", "fresh_start", "fresh_start (≥ 3.30): "
              "one summary replaces everything; keep_last_3 (≤ 3.29): first message, "
              "summary, last 3 messages.", _choice("fresh_start", "keep_last_3"),
              kind="choice", choices=("fresh_start", "keep_last_3")),
    _mode("roo_mode", "Roo Code condensation"),
    _source("roo_token_source", "Roo Code token source"),
    # Aider (SPEC-agents-2 §5)
    ParamSpec("aider_max_chat_history_tokens", "Chat history limit", None,
              "--max-chat-history-tokens; empty: max_input/16 within 1,024–8,192.",
              _opt_int_range(1, 100_000_000), unit="tokens", kind="optional-int"),
    ParamSpec("aider_max_input_tokens", "Model input limit", None, "The model's "
              "max_input_tokens; empty: by model (unknown: the 1,024 limit).",
              _opt_int_range(1, 100_000_000), unit="tokens", kind="optional-int"),
    # OpenCode (SPEC-agents-2 §6)
    _bool("opencode_auto", "Auto-compaction", True, "compaction.auto."),
    _bool("opencode_prune", "Prune old tool output", True, "compaction.prune."),
    _window("opencode_context_limit", "model.limit.context; empty: by model."),
    ParamSpec("opencode_input_limit", "Input limit", None, "model.limit.input; empty: by "
              "model (none for most).", _opt_int_range(1, 100_000_000), unit="tokens",
              kind="optional-int"),
    ParamSpec("opencode_max_output", "Max output", None, "model.limit.output; empty: by "
              "model (32,000 when unknown).", _opt_int_range(1, 100_000_000), unit="tokens",
              kind="optional-int", undocumented_by="OpenCode"),
    ParamSpec("opencode_reserved", "Reserved", None, "compaction.reserved; empty: "
              "min(20,000, max output).", _opt_int_range(0, 100_000_000), unit="tokens",
              kind="optional-int"),
    ParamSpec("opencode_keep_tokens", "Recent tail kept", 15000, "compaction.keep.tokens "
              "(compact v2, 2026-06): recent messages kept verbatim after the summary; 0: "
              "none (earlier releases).", _int_range(0, 100_000_000), unit="tokens"),
    ParamSpec("opencode_prune_protect", "Prune protects", 40000, "PRUNE_PROTECT: newest tool "
              "output tokens never pruned.", _int_range(0, 100_000_000), unit="tokens"),
    ParamSpec("opencode_prune_minimum", "Prune minimum", 20000, "PRUNE_MINIMUM: prune only "
              "when more than this would be cleared.", _int_range(0, 100_000_000),
              unit="tokens"),
    ParamSpec("opencode_protected_tools", "Never pruned", ("skill",), "PRUNE_PROTECTED_TOOLS.",
              _string_list, kind="list"),
    _mode("opencode_mode", "OpenCode compaction"),
    _source("opencode_token_source", "OpenCode token source"),
    # mini-swe-agent (SPEC-agents-2 §8)
    ParamSpec("mini_swe_output_limit", "Output limit", 10000, "Outputs of this many "
              "characters or more get the <warning> form of the observation template.",
              _int_range(1, 100_000_000), unit="chars"),
    ParamSpec("mini_swe_head_chars", "Head kept", 5000, "<output_head> characters.",
              _int_range(0, 100_000_000), unit="chars"),
    ParamSpec("mini_swe_tail_chars", "Tail kept", 5000, "<output_tail> characters.",
              _int_range(0, 100_000_000), unit="chars"),
)})
