"""Aider chat history (`.aider.chat.history.md`): append-only Markdown written by aider's
`InputOutput`. Every process start writes `# aider chat started at YYYY-MM-DD HH:MM:SS`: each
such header starts a session (one the model never answered — aider started and quit, or only
ran /commands — is left out, with a warning).

Inside a session, as aider's own `split_chat_history_markdown` reads it: lines starting
`#### ` are the user's input (consecutive ones form one message; `/commands` are tagged
`meta.aider_command`), lines starting `> ` are aider's tool/status output (kept in
`meta.aider_output` of the message they follow, never sent to the model; aider ends each
such message with two trailing spaces, so one of several lines runs from its `> ` line to the
line that ends so, the lines between carrying no `> `), everything else is
the assistant's reply. Aider acts through the reply text (SEARCH/REPLACE or whole-file
blocks), not tool calls, so its sessions have no tool calls.

Recorded usage (SPEC §11): the `> Tokens: <sent> sent[, <w> cache write][, <h> cache hit],
<r> received.` line after a reply (older releases: `, <h> cached`; `1.2k` → 1,200 and
`12k` → 12,000 as aider rounds them; older releases print exact numbers with separators):
`total_input` = sent, `cache_read` = hit, `cache_write` = write, `output` = received. The
banner gives the version (`> Aider v0.85.1` → `agent_version`), the model and the edit
format. Summaries are never recorded (aider keeps them in memory only).
"""

from __future__ import annotations

import re
from typing import Any

from ctxsim.pipeline.messages import Message, Session

from .common import require_sessions, title_from
from .errors import Near, TranscriptError
from .source import Probe, Source

NAME = "aider"
HEADER = "# aider chat started at "
_NUMBER = r"\d[\d,]*(?:\.\d+)?k?"  # 1,234 / 1.2k / 12k
_TOKENS = re.compile(rf"Tokens: {_NUMBER} sent\b.*?{_NUMBER} received")
_COUNT = re.compile(rf"({_NUMBER}) (sent|cache write|cache hit|cached|received)\b")
_VERSION = re.compile(r"^Aider v(\S+)")
_MODEL = re.compile(r"^(?:Main )?[Mm]odels?: (\S+?),?(?: with (\S+) edit format)?(?:,|$| )")


def detect(probe: Probe) -> bool | str:
    if probe.records:
        return "JSON, not Markdown"
    head = probe.head.decode("utf-8", "replace")
    if head.lstrip().startswith(HEADER.strip()) or f"\n{HEADER}" in head:
        return True
    if f"\n{head}".count("\n#### ") and ("> Tokens: " in head or "> Aider v" in head):
        return Near("there are `####` input and `>` output lines but no "
                    "`# aider chat started at` line", 3)
    return "no `# aider chat started at` line"


def tokens(text: str) -> int:
    text = text.replace(",", "")
    if text.endswith("k"):
        return round(float(text[:-1]) * 1000)
    return int(float(text))


def usage_of(line: str) -> dict[str, Any] | None:
    found = _TOKENS.search(line)
    if found is None:
        return None
    counts = {label: tokens(number) for number, label in _COUNT.findall(found.group())}
    sent = counts["sent"]
    # Releases before the "cache write / cache hit" wording printed "N cached" [O], read as
    # cache hits [X].
    hit = counts.get("cache hit", counts.get("cached"))
    write = counts.get("cache write")
    fresh = sent - (hit or 0) - (write or 0)
    return {"total_input": sent, "input": fresh if fresh >= 0 else None, "cache_read": hit,
            "cache_write": write, "output": counts.get("received"), "reasoning": None}


class _Session:
    def __init__(self, started: str, line: int):
        self.started = started
        self.line = line
        self.messages: list[Message] = []
        self.meta: dict[str, Any] = {"started": started, "source_line": line}
        self.role = ""
        self.lines: list[str] = []
        self.first_line = line
        self.output: list[str] = []
        self.usage: dict[str, Any] | None = None
        self.quoting = False  # inside a `>` block that spans lines (see `parse`)

    def flush(self) -> None:
        text = "\n".join(self.lines).strip("\n")
        if self.role and text:
            meta: dict[str, Any] = {"source_line": self.first_line}
            if self.role == "user" and text.startswith("/"):
                meta["aider_command"] = text.split(None, 1)[0]
            self.messages.append(Message.of(self.role, text, meta=meta))
        self.role, self.lines = "", []
        self.attach()

    def attach(self) -> None:
        """`>` output goes on the message it follows (the banner on the session)."""
        if not self.output and self.usage is None:
            return
        if not self.messages:
            self.meta.setdefault("banner", []).extend(self.output)
        else:
            last = self.messages[-1]
            meta = dict(last.meta)
            if self.output:
                meta["aider_output"] = [*meta.get("aider_output", []), *self.output]
            if self.usage is not None and last.role == "assistant":
                meta["recorded"] = self.usage
            self.messages[-1] = Message.of(last.role, last.content, meta=meta)
        self.output, self.usage = [], None

    def add(self, role: str, text: str, line: int) -> None:
        if role != self.role:
            self.flush()
            self.role, self.first_line = role, line
        self.lines.append(text)

    def status(self, text: str, *, more: bool = False) -> None:
        """A line of aider's `>` output; `more`: it continues the block before it."""
        if more:
            self.output[-1] += f"\n{text}"
            return
        self.flush()
        self.output.append(text)
        usage = usage_of(text)
        if usage is not None:
            self.usage = usage
        if (version := _VERSION.match(text)) and "agent_version" not in self.meta:
            self.meta["agent_version"] = version.group(1)
        if (model := _MODEL.match(text)) and "model" not in self.meta:
            self.meta["model"] = model.group(1)
            if model.group(2):
                self.meta["edit_format"] = model.group(2)


def parse(source: Source) -> list[Session]:
    sessions: list[_Session] = []
    current: _Session | None = None
    for line_no, raw in source.lines():
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError:
            raise TranscriptError("the file is not UTF-8 text", line=line_no) from None
        if line.startswith(HEADER):
            if current is not None:
                current.flush()
            current = _Session(line[len(HEADER):].strip(), line_no)
            sessions.append(current)
            continue
        if current is None:
            if not line.strip():
                continue
            current = _Session("", line_no)  # a file cut before its first header
            sessions.append(current)
        # A status message of several lines (a SEARCH/REPLACE failure, a commit message)
        # runs to the line ending with two spaces (see the module docstring).
        if current.quoting and not (line.startswith("#### ") or line == "####"):
            current.status(line.removesuffix("  "), more=True)
            current.quoting = not line.endswith("  ")
            continue
        current.quoting = False
        if line.startswith("#### ") or line == "####":
            current.add("user", line[5:].removesuffix("  "), line_no)
        elif line.startswith("> ") or line == ">":
            current.status(line[2:].removesuffix("  "))
            current.quoting = line.startswith("> ") and not line.endswith("  ")
        elif current.role == "user" and not line.strip():
            current.flush()
        else:
            current.add("assistant", line, line_no)
    if current is not None:
        current.flush()
    # A start the model never answered (only the banner, or only /commands) is no session.
    kept = [s for s in sessions if any(m.role == "assistant" for m in s.messages)]
    require_sessions(kept, "the history has no model reply (only aider start banners and "
                           "commands)")
    empty = len(sessions) - len(kept)
    out = []
    for number, session in enumerate(kept, start=1):
        warnings = (f"{empty} aider start(s) without a model reply were left out",) \
            if empty and number == 1 else ()
        out.append(Session(format=NAME, title=title_from(session.messages, "aider chat"),
                           messages=tuple(session.messages),
                           key=f"{session.started or 'session'}#{number}",
                           meta=session.meta, warnings=warnings))
    return out
