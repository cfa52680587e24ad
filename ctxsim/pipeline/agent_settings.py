"""The agents' own settings as ctxsim's parameters carry them (SPEC-agents §2.5.0.9).

`claude_env` is the env block of Claude Code's settings.json, read the way a JavaScript program
usually reads environment text (`CLAUDE_ENV_KEYS`, `clean_claude_env`, `claude_env_effective`
→ `ClaudeEnv`); `codex_config` holds top-level keys of Codex's config.toml
(`CODEX_CONFIG_KEYS`, `clean_codex_config`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .agents_common import is_env_truthy, js_parse_float, js_parse_int

CLAUDE_ENV_KEYS = (
    "BASH_MAX_OUTPUT_LENGTH",
    "MAX_MCP_OUTPUT_TOKENS",
    "CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS",
    "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
    "CLAUDE_CODE_AUTO_COMPACT_WINDOW",
    "DISABLE_AUTO_COMPACT",
    "DISABLE_COMPACT",
)
BASH_DEFAULT, BASH_CEILING = 30000, 150000
MCP_DEFAULT = READ_DEFAULT = 25000


def clean_claude_env(v: Any) -> dict[str, str]:
    """Validate `claude_env`: an object of the known keys to strings."""
    if not isinstance(v, Mapping):
        raise ValueError("expected an object of strings (the env block of settings.json)")
    for k, x in v.items():
        if k not in CLAUDE_ENV_KEYS:
            raise ValueError(f"{k}: unknown key (known: {', '.join(CLAUDE_ENV_KEYS)})")
        if not isinstance(x, str):
            raise ValueError(f"{k}: expected a string (Claude Code reads environment text)")
    return dict(v)


@dataclass(frozen=True)
class ClaudeEnv:
    """The effective values Claude Code makes of `claude_env`, with a warning per ignored one."""

    bash_max_output: int
    mcp_max_tokens: int
    read_max_tokens: int
    pct_override: float | None
    auto_compact_window: int | None
    disable_auto_compact: bool
    disable_compact: bool
    warnings: tuple[str, ...]


def _positive_int(p: float | int) -> int | None:
    return p if isinstance(p, int) and p > 0 else None


def claude_env_effective(env: Mapping[str, str]) -> ClaudeEnv:
    """Parse `claude_env` as ctxsim reads Claude Code's variables (§2.5.0.9 table)."""
    warnings: list[str] = []
    raw = env.get("BASH_MAX_OUTPUT_LENGTH")
    bash = BASH_DEFAULT
    if raw is not None and raw != "":
        p = js_parse_int(raw)
        if _positive_int(p) is None:
            warnings.append(f'BASH_MAX_OUTPUT_LENGTH: "{raw}" is not a positive integer; '
                            f"using {BASH_DEFAULT}")
        elif p > BASH_CEILING:
            bash = BASH_CEILING
            warnings.append(f"BASH_MAX_OUTPUT_LENGTH: {p} is above the ceiling of "
                            f"{BASH_CEILING}; using {BASH_CEILING}")
        else:
            bash = int(p)
    mcp = _positive_int(js_parse_int(env.get("MAX_MCP_OUTPUT_TOKENS", ""))) or MCP_DEFAULT
    read = (_positive_int(js_parse_int(env.get("CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS", "")))
            or READ_DEFAULT)
    for key, default in (("MAX_MCP_OUTPUT_TOKENS", MCP_DEFAULT),
                         ("CLAUDE_CODE_FILE_READ_MAX_OUTPUT_TOKENS", READ_DEFAULT)):
        typed = env.get(key)
        if typed and _positive_int(js_parse_int(typed)) is None:
            warnings.append(f'{key}: "{typed}" is not a positive integer; using {default}')
    pct: float | None = None
    typed = env.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE")
    if typed is not None:
        p = js_parse_float(typed)
        if 0 < p <= 100:
            pct = p
        elif typed != "":
            warnings.append(f'CLAUDE_AUTOCOMPACT_PCT_OVERRIDE: "{typed}" is not a percentage '
                            "above 0 and at most 100; ignored")
    window: int | None = None
    typed = env.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW")
    if typed is not None:
        window = _positive_int(js_parse_int(typed))
        if window is None and typed != "":
            warnings.append(f'CLAUDE_CODE_AUTO_COMPACT_WINDOW: "{typed}" is not a positive '
                            "integer; ignored")
    return ClaudeEnv(bash, mcp, read, pct, window,
                     is_env_truthy(env.get("DISABLE_AUTO_COMPACT")),
                     is_env_truthy(env.get("DISABLE_COMPACT")), tuple(warnings))


CODEX_CONFIG_KEYS: dict[str, str | int] = {
    "model": "string",
    "tool_output_token_limit": 0,
    "model_context_window": 1,
    "model_auto_compact_token_limit": 1,
}


def clean_codex_config(v: Any) -> dict[str, Any]:
    """Validate `codex_config`: top-level keys of Codex's config.toml, TOML integers only."""
    if not isinstance(v, Mapping):
        raise ValueError("expected an object (top-level keys of ~/.codex/config.toml)")
    out: dict[str, Any] = {}
    for k, x in v.items():
        rule = CODEX_CONFIG_KEYS.get(k)
        if rule is None:
            raise ValueError(f"{k}: unknown key (known: {', '.join(CODEX_CONFIG_KEYS)})")
        if rule == "string":
            if not isinstance(x, str):
                raise ValueError(f"{k}: expected a string")
        elif isinstance(x, bool) or not isinstance(x, int):
            raise ValueError(f"{k}: expected an integer")
        elif isinstance(rule, int) and x < rule:
            raise ValueError(f"{k}: must be at least {rule}")
        out[k] = x
    return out
