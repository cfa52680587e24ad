"""The agent release that wrote a transcript, and what that release did (SPEC-agents §2.5.0.11).

Agents change their context management between releases. The **era table** below is data:
each row is one change a release made — the versions it covers, the parameter values in force
there, the sentence the session page shows, and the public fact it rests on (tags as in
SPEC-agents §2.5.0.1: D changelog/docs, I issues, O observed transcripts, X ctxsim's reading).
The era of a version is every row that covers it; versions past every row run on the
parameters' defaults, which describe the current releases.

Where the era applies: a built-in profile of an agent (`claude-code` and its variants,
`codex` and `codex-recorded`; `AGENT_PROFILES`) replaying a transcript of that same agent.
Resolution order (`profiles.resolve`): parameter defaults ← era ← the profile's own values ←
explicit values, so a user's value always wins and a variant's deliberate choice (say
`claude-code-recorded`'s recorded microcompactions) is kept.

Where the version comes from: Claude Code writes `version` on every line, and the importer
keeps the first one seen as the session's `meta["version"]`; a Codex rollout's
`session_meta.cli_version` is `meta["cli_version"]`; a legacy Codex rollout (the bare format
before 0.40, `shared/transcript-formats.md` 5b) records none but is older than 0.40. A session
resumed under a newer release keeps the version of its first line [X: one era per session].
OpenHands' event files record no version, so no OpenHands row exists yet.

The part-2 agents with version switches (Gemini CLI, Roo Code; SPEC-agents-2) keep their eras
as data beside their stages (`ERAS` of `stages/_gemini.py` and `stages/roo_condense.py`,
listed in `registry.ERA_TABLES`, each era the full set of values from its first version on);
`agent_rows()` turns each era into the rows of this table (its values that differ from the
defaults, up to the next era), so they take the same path: `session_era` → `resolve` with the
same precedence, the same note on the page. Neither agent's files record a version [X: Gemini
CLI session files and Roo Code task folders carry none], so the era is the one their
`gemini_version` / `roo_version` parameter names (`VERSION_PARAMS`), else the current
behaviour, said so. The stages still read the same tuples when run on their own
(`_agents2.era_values`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class EraRow:
    """One release change: the values in force for versions in [`since`, `before`)."""

    agent: str
    params: Mapping[str, Any]
    behaviour: str  # what the page says while the row applies
    sources: tuple[str, ...]
    since: str | None = None  # first version covered (inclusive); None: from the start
    before: str | None = None  # first version no longer covered; None: to the newest

    def covers(self, version: tuple[int, ...]) -> bool:
        lo = parse_version(self.since) if self.since else None
        hi = parse_version(self.before) if self.before else None
        return (lo is None or version >= lo) and (hi is None or version < hi)

    @property
    def span(self) -> str:
        if self.since and self.before:
            return f"{self.since} to before {self.before}"
        return f"before {self.before}" if self.before else f"from {self.since}"


CLAUDE_CODE = "claude-code"
CODEX = "codex"
GEMINI = "gemini-cli"
ROO = "roo-code"
AGENT_LABELS = {CLAUDE_CODE: "Claude Code", CODEX: "Codex CLI", "openhands": "OpenHands",
                GEMINI: "Gemini CLI", ROO: "Roo Code"}
CC_CHANGELOG = "D Claude Code CHANGELOG.md (github.com/anthropics/claude-code)"

ERA_TABLE: tuple[EraRow, ...] = (
    EraRow(CLAUDE_CODE, {"cc_bash_mode": "middle"},
           "Bash output middle-truncated at 30,000 characters (BASH_MAX_OUTPUT_LENGTH), "
           "never saved to disk",
           (f"{CC_CHANGELOG} 2.1.2: “Changed large tool outputs to be persisted to disk "
            "instead of truncated”",
            "D env vars, 2025 wording of BASH_MAX_OUTPUT_LENGTH: characters “before they are "
            "middle-truncated” (docs snapshot patrickcarmichael/claude-docs a9add26)",
            "O shared/transcripts/claude-code-jsonl/agentcmd__full-session-five.jsonl (2.0.28): "
            "the “... [N lines truncated] ...” marker"),
           before="2.1.2"),
    EraRow(CLAUDE_CODE, {"cc_persist_threshold_chars": None},
           "no other tool's result saved to disk",
           (f"{CC_CHANGELOG} 2.1.2 (large tool outputs persisted “instead of truncated”)",),
           before="2.1.2"),
    EraRow(CLAUDE_CODE, {"cc_persist_threshold_chars": 100000},
           "other tools' results saved to disk over 100,000 characters",
           (f"{CC_CHANGELOG} 2.1.51: “Tool results larger than 50K characters are now "
            "persisted to disk (previously 100K)”",),
           since="2.1.2", before="2.1.51"),
    EraRow(CLAUDE_CODE, {"cc_mcp_mode": "error"},
           "an MCP result over 25,000 tokens (MAX_MCP_OUTPUT_TOKENS) refused with an error",
           ("I dbt-labs/dbt-mcp#178 (2025-06-18) and GuDaStudio/codexmcp#4 (2025-11-16): "
            "“MCP tool … response (N tokens) exceeds maximum allowed tokens (25000)”",
            "I invest-composer/composer-trade-mcp#38 (2026-02-15): an oversized MCP result "
            "“has been saved to” a file instead",
            "X the switch is placed at 2.1.2, the release whose changelog moves large tool "
            "outputs to disk"),
           before="2.1.2"),
    EraRow(CLAUDE_CODE, {"cc_microcompact_trigger": "off"},
           "no microcompact (old results never cleared)",
           ("O shared/transcript-formats.md §4: `microcompact_boundary` records appear from "
            "2.1.63",
            "I anthropics/claude-code#42542: results “silently replaced with [Old tool result "
            "content cleared]” from about 2.1.89",
            "X earlier releases recorded no clearing, so none is simulated"),
           before="2.1.63"),
    EraRow(CLAUDE_CODE, {"cc_summary_template": "v1"},
           "the 2025 wording of the compaction summary (v1)",
           (f"{CC_CHANGELOG} 2.1.69: “Changed resuming after compaction to no longer produce "
            "a preamble recap before continuing”",
            "O v1 wording in exported 2025 transcripts, v2 (“do not recap what was "
            "happening”) in 2026 ones",
            "X the opening sentence is taken to have changed in the same release"),
           before="2.1.69"),
    EraRow(CLAUDE_CODE, {"cc_autocompact_buffer_tokens": 25000},
           "auto-compact 45,000 tokens below the window (the 20,000 summary reserve and a "
           "25,000 buffer: 155,000 on a 200,000 window)",
           ("I anthropics/claude-code#10266 (2025-10-24), #11781 (2.0.42), #12053: /context "
            "shows “Autocompact buffer: 45k tokens (22.5%)”; #23409 (2026-02-05): 33k "
            "(16.5%)",
            "O public sessions' compact_boundary preTokens (auto): 155,031–157,925 from 2.0.76 "
            "to 2.1.20 (41 boundaries), 167,038–176,700 from 2.1.25 to 2.1.42",
            "X the change is placed at 2.1.21 (2.1.21–2.1.24 not observed); before 2.0 not "
            "observed: the row starts at 2.0.0"),
           since="2.0.0", before="2.1.21"),
    EraRow(CODEX, {"codex_output_truncation": "rollout"},
           "tool output recorded as the tool cut it (10 KiB / 256 lines), MCP output whole",
           ("I openai/codex#6544: “Since Codex v0.56 … every tool call's text payload … is "
            "capped”; “Pinning to ≤ 0.55.0 restores full-context tool usage”",
            "I openai/codex#5913 (2025-10-29): outputs truncated at “10 KiB or 256 lines”",
            "O shared/transcripts/codex-rollout (0.40.0): outputs recorded with "
            "“[... omitted N of M lines ...]”"),
           before="0.56.0"),
    EraRow(CODEX, {"codex_limit_semantics": "override"},
           "model_auto_compact_token_limit replaces 90 % of the window, even above it",
           ("I openai/codex#11805: 0.99.0 respects a configured limit above 90 %, 0.100.0 "
            "clamps it to min(limit, 90 % of the window)",
            "I openai/codex#11516 (merged 2026-02-12): “Clamp auto-compact limit to context "
            "window”"),
           before="0.100.0"),
)

# Transcript format → agent (the importers' format names).
FORMAT_AGENTS = {"claude-code": CLAUDE_CODE, "codex": CODEX, "codex-legacy": CODEX,
                 "openhands": "openhands", "openhands-eval": "openhands",
                 "gemini-cli": GEMINI, "gemini-cli-jsonl": GEMINI, "roo-code": ROO}
# The built-in profiles an era applies to, by agent (SPEC-agents §2.5.9).
AGENT_PROFILES = {
    CLAUDE_CODE: ("claude-code", "claude-code-recorded", "claude-code-thinking",
                  "claude-code-context-editing"),
    CODEX: ("codex", "codex-recorded"),
    "openhands": ("openhands", "openhands-app"),
    GEMINI: ("gemini-cli",),
    ROO: ("roo-code",),
}
PROFILE_AGENTS = {name: agent for agent, names in AGENT_PROFILES.items() for name in names}
# Where each agent's transcript records its version (session `meta` key).
VERSION_KEYS = {CLAUDE_CODE: "version", CODEX: "cli_version", GEMINI: "agent_version",
                ROO: "agent_version"}
# The parameter that names the release when the transcript does not (it wins over the file's).
VERSION_PARAMS = {GEMINI: "gemini_version", ROO: "roo_version"}
# A format that implies a version range when none is recorded.
IMPLIED_VERSIONS = {"codex-legacy": ("0.39.0", "a pre-0.40 (legacy) rollout")}

_VERSION = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def parse_version(text: Any) -> tuple[int, ...] | None:
    """`"1.0.17"` → (1, 0, 17); a pre-release or build suffix is ignored (`"0.100.0-alpha.2"`
    is 0.100.0 [X]); text without a leading number → None."""
    if not isinstance(text, str):
        return None
    m = _VERSION.match(text)
    if m is None:
        return None
    parts = [int(p) for p in m.group(1).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()  # 2.1 == 2.1.0
    return tuple(parts)


@dataclass(frozen=True)
class Era:
    """The release a session's transcript was written by and the rows in force for it."""

    agent: str
    version: str | None  # as recorded; None when the transcript records none
    rows: tuple[EraRow, ...] = ()
    described_as: str = ""  # how the version is known when not recorded, e.g. a legacy format
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}),
                                      compare=False)

    @property
    def label(self) -> str:
        name = AGENT_LABELS.get(self.agent, self.agent)
        if self.version:
            return f"{name} {self.version}"
        return f"{name}, {self.described_as or 'version not recorded'}"

    @property
    def note(self) -> str:
        """The page's sentence: "Claude Code 1.0.17: that release's behaviour — Bash output …"."""
        if not self.rows:
            return f"{self.label}: current behaviour (no release switch applies)."
        return f"{self.label}: that release's behaviour — " + "; ".join(
            r.behaviour for r in self.rows) + "."

    def source_of(self, name: str) -> str:
        """Why the era sets this parameter: the row's behaviour and versions."""
        row = next((r for r in self.rows if name in r.params), None)
        return "" if row is None else f"{self.label} ({row.span}): {row.behaviour}"


@cache
def agent_rows() -> tuple[EraRow, ...]:
    """The part-2 agents' eras (`registry.ERA_TABLES`) as rows: each era's values that differ
    from the parameters' defaults, from its first version to the next era's."""
    from .params import PARAMS
    from .registry import ERA_TABLES

    rows: list[EraRow] = []
    for agent, eras in ERA_TABLES.items():
        for k, era in enumerate(eras):
            params = {n: v for n, v in era.values.items() if v != PARAMS[n].default}
            if params:
                rows.append(EraRow(agent, params, era.label, (f"D {era.source}",),
                                   since=era.since if k else None,
                                   before=eras[k + 1].since if k + 1 < len(eras) else None))
    return tuple(rows)


def era_for(agent: str, version: str | None, described_as: str = "",
            implied: str | None = None) -> Era:
    """The era of `version` (or of `implied` when none is recorded) for `agent`."""
    parsed = parse_version(version) or parse_version(implied)
    rows = tuple(r for r in (*ERA_TABLE, *agent_rows()) if r.agent == agent
                 and parsed is not None and r.covers(parsed))
    params: dict[str, Any] = {}
    for row in rows:
        params.update(row.params)
    return Era(agent, version if parse_version(version) else None, rows, described_as,
               MappingProxyType(params))


def session_era(profile: str, transcript_format: str, meta: Mapping[str, Any] | None,
                config: Mapping[str, Any] | None = None) -> Era | None:
    """The era for replaying a session of `transcript_format` under built-in `profile`: None
    when the profile is not that agent's (a Claude Code profile on a Codex rollout runs on
    current behaviour, as a what-if). An explicit `VERSION_PARAMS` value in `config` names
    the release instead of the file."""
    agent = FORMAT_AGENTS.get(transcript_format)
    if agent is None or PROFILE_AGENTS.get(profile) != agent:
        return None
    given = (config or {}).get(VERSION_PARAMS.get(agent, ""))
    version = given if isinstance(given, str) and parse_version(given) else \
        (meta or {}).get(VERSION_KEYS.get(agent, ""))
    version = version if isinstance(version, str) and parse_version(version) else None
    implied, described = IMPLIED_VERSIONS.get(transcript_format, (None, ""))
    return era_for(agent, version, "" if version else described, None if version else implied)
