"""Session titles: the first thing the user really asked, not the wrappers agents put around it.

Agents prefix a session's first user messages with boilerplate that would make every title alike:
Claude Code's slash-command wrappers (`<command-name>/clear</command-name>`, `<command-message>`),
its `<local-command-stdout>` echoes and `<system-reminder>` blocks; Codex's IDE context
("# Context from my IDE setup:", with the request under "## My request for Codex:"),
`<environment_context>` and `<user_instructions>`; SWE-agent's fixed opening sentence before the
issue text. `request_line` strips those and returns the first line a person would recognize, or
None when nothing real is left (the message is skipped and the next one is tried).

A slash command is a request when it has arguments (`/review src/` stays as typed) or is one of
Claude Code's built-in commands that start a task (`COMMAND_TITLES`): `/init` alone titles the
session "Initialise CLAUDE.md: <project>" (the last part of the session's working directory).
Commands that only change the session (`/clear`, `/model`, …) and custom commands without
arguments are not requests.
"""

from __future__ import annotations

import re

TITLE_CHARS = 80

# Blocks that carry no request of their own, removed with their content.
_NOISE_BLOCKS = re.compile(
    r"<(system-reminder|local-command-stdout|local-command-stderr|environment_context|"
    r"user_instructions|command-contents)>.*?(</\1>|\Z)",
    re.DOTALL,
)
# Markup agents wrap a request in; other angle brackets are the user's own text and stay.
_WRAPPER_TAGS = re.compile(r"</?(command-message|bash-input|user-prompt-submit-hook)>")
_LEADING_TAGS = re.compile(r"^(?:</?[a-zA-Z][\w-]*(?:\s[^<>]*)?>\s*)+")
_COMMAND_NAME = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.DOTALL)
_COMMAND_ARGS = re.compile(r"<command-args>\s*(.*?)\s*</command-args>", re.DOTALL)
_IDE_CONTEXT = "# Context from my IDE setup:"
_IDE_REQUEST = re.compile(r"^## My request for Codex:[ \t]*\n?", re.MULTILINE)
# SWE-agent's templates open with one generic sentence; the issue's own first line follows.
_SWE_OPENING = re.compile(
    r"^We're currently solving the following (issue within our repository|CTF challenge)\."
    r"([^\n]*)\n(?:ISSUE:\s*\n)?",
)
# A Markdown heading, list item, quote or fence ends the request's first paragraph.
_BLOCK_START = re.compile(r"(#|\*\*|[-*>] |\d+[.)] |```)")
_CTF_NAME = re.compile(r'The CTF challenge is an? (.*? problem named "[^"]+")')


# Claude Code's built-in commands that start a task (its documented slash commands), as a title.
COMMAND_TITLES = {
    "/init": "Initialise CLAUDE.md",
    "/review": "Review a pull request",
    "/pr-comments": "Pull request comments",
    "/security-review": "Security review of the pending changes",
}


def command_title(name: str, arguments: str, project: str = "") -> str | None:
    """A slash command's title: the command's phrase with its arguments, else the project
    ("Initialise CLAUDE.md: shop"); `/name arguments` for other commands with arguments; None
    for one without arguments that is not a task."""
    name = name if name.startswith("/") else "/" + name
    phrase = COMMAND_TITLES.get(name)
    if phrase is None:
        return _first_line(f"{name} {arguments}") if arguments else None
    detail = _first_line(arguments) if arguments else project
    return shorten(f"{phrase}: {detail}" if detail else phrase)


def project_name(cwd: str) -> str:
    """The project a working directory names: its last part (`/home/me/shop` → `shop`)."""
    return cwd.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def shorten(line: str) -> str:
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


def request_line(text: str, project: str = "") -> str | None:
    """The first meaningful line of a user message, or None when it is only boilerplate.
    `project` names the session's project in a command's title (`command_title`)."""
    command = _COMMAND_NAME.search(text)
    if command:
        args = _COMMAND_ARGS.search(text)
        return command_title(command.group(1).strip(), args.group(1).strip() if args else "",
                             project)
    if text.lstrip().startswith(_IDE_CONTEXT):
        request = _IDE_REQUEST.search(text)
        if request is None:
            return None
        text = text[request.end():]
    text = _NOISE_BLOCKS.sub("", text)
    opening = _SWE_OPENING.match(text.lstrip())
    if opening:
        ctf = _CTF_NAME.search(opening.group(2))
        text = f"CTF: {ctf.group(1)}" if ctf else text.lstrip()[opening.end():]
    return _first_line(_WRAPPER_TAGS.sub("", text))


def _first_line(text: str) -> str | None:
    """The first paragraph on one line: requests are often hard-wrapped."""
    paragraph: list[str] = []
    for line in text.splitlines():
        line = " ".join(_LEADING_TAGS.sub("", line.strip()).split())
        if line and paragraph and _BLOCK_START.match(line):
            break
        if line:
            paragraph.append(line)
        elif paragraph:
            break
        if sum(map(len, paragraph)) > TITLE_CHARS:
            break
    return shorten(" ".join(paragraph)) if paragraph else None
