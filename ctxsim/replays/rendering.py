"""How the call view shows structured content: pretty JSON, highlighted code and diffs, edits
as diffs.

Everything here returns HTML built from escaped text only: Pygments' HTML formatter escapes
every token it writes, and the spans it adds carry nothing but its own class names. What
cannot be parsed, or is too large to be worth highlighting, is left to the caller to show as
plain escaped text. Highlighting is capped per text (`MAX_HIGHLIGHT`) and per call view
(`Budget`), so a late call of a long session stays quick to render.
"""

from __future__ import annotations

import difflib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, JsonLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from ctxsim.pipeline import jsontext

# A text longer than this is not highlighted (nor parsed as JSON for pretty-printing).
MAX_HIGHLIGHT = 20_000
# What one call view highlights at most, in characters; the rest is plain text.
CALL_BUDGET = 200_000
# Pretty-printed JSON is cut here (the raw text stays one click away).
MAX_PRETTY = 6_000

_FORMATTER = HtmlFormatter(nowrap=True)
_JSON = JsonLexer()
_DIFF = DiffLexer()


@dataclass
class Budget:
    """What is left to highlight in one call view."""

    left: int = CALL_BUDGET

    def take(self, text: str) -> bool:
        if len(text) > MAX_HIGHLIGHT or len(text) > self.left:
            return False
        self.left -= len(text)
        return True


def highlight(text: str, lexer: Lexer, budget: Budget) -> str | None:
    """`text` as highlighted HTML (escaped tokens in spans), or None over the caps."""
    if not budget.take(text):
        return None
    key = (lexer, text)
    html = _HIGHLIGHTED.get(key)
    if html is None:
        html = pygments_highlight(text, lexer, _FORMATTER)
        # The lexers end every text with a newline; keep the text's own ending.
        if html.endswith("\n") and not text.endswith("\n"):
            html = html[:-1]
        _HIGHLIGHTED.put(key, html)
    return html


class _Highlighted:
    """Highlighted texts a process made last, within `limit` characters: a message shows the
    same at every call that sends it, and the call views of consecutive calls, made one by
    one, highlighted each again (a twelfth of a loaded web worker's CPU, issue 31)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self._items: OrderedDict[tuple[Lexer, str], str] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Lexer, str]) -> str | None:
        with self._lock:
            html = self._items.get(key)
            if html is not None:
                self._items.move_to_end(key)
            return html

    def put(self, key: tuple[Lexer, str], html: str) -> None:
        with self._lock:
            if key not in self._items:
                self._items[key] = html
                self.size += len(key[1]) + len(html)
            while self.size > self.limit and self._items:
                (_, text), gone = self._items.popitem(last=False)
                self.size -= len(text) + len(gone)


_HIGHLIGHTED = _Highlighted(8 * 1024 * 1024)


@lru_cache(maxsize=256)
def lexer_for_path(path: str) -> Lexer | None:
    """A lexer chosen by a file name (from the tool call that read it), or None."""
    name = path.rsplit("/", 1)[-1]
    if not name or "." not in name:
        return None
    try:
        return get_lexer_for_filename(name, stripnl=False)
    except ClassNotFound:
        return None


# The files agents read most, whose lexers `warm_lexers` loads.
WARM_EXTENSIONS = ("py", "js", "ts", "tsx", "go", "rs", "java", "c", "cpp", "rb", "sh", "md",
                   "json", "yaml", "toml", "html", "css", "sql")


def warm_lexers() -> None:
    """Pygments compiles every lexer's file-name patterns at its first look-up (0.3-0.4 s that
    the first call view showing a file's content paid, issue 31) and imports a language's
    lexer when a file of it is first shown (0.13 s in a worker's first request for .go, .js,
    .md and .sh files): done once before serving (`services.warm_up`)."""
    for extension in WARM_EXTENSIONS:
        lexer_for_path(f"warm.{extension}")


def looks_like_diff(text: str) -> bool:
    head = text[:2000]
    return (head.startswith(("diff --git", "*** Begin Patch", "--- ", "Index: "))
            or ("\n--- " in head and "\n+++ " in head and "\n@@" in head))


def pretty_json(text: str) -> str | None:
    """An object or array, indented (cut at MAX_PRETTY); None when `text` is not one."""
    stripped = text.strip()
    if len(stripped) > MAX_HIGHLIGHT or stripped[:1] not in ("{", "["):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    return pretty if len(pretty) <= MAX_PRETTY else pretty[:MAX_PRETTY] + "\n…"


# A JSON tool output up to this size is shown as the text it carries (past it, as it is).
MAX_UNWRAP = 4_000_000
# The keys whose string is a JSON tool output's text: Codex's `function_call_output`
# (`{"output": …, "metadata": …}`), and the usual names of a tool's text elsewhere.
TEXT_KEYS = ("output", "content", "text", "stdout")


def json_text(data: bytes) -> tuple[str, Any] | None:
    """The text a JSON tool output carries (a Codex `{"output": "…", "metadata": …}`, an
    object with a `content` / `text` / `stdout` string, a list of `{"type": "text"}` parts),
    with its line breaks as line breaks, and the parsed JSON; None when `data` is no such
    JSON."""
    stripped = data.strip()
    if len(stripped) > MAX_UNWRAP or stripped[:1] not in (b"{", b"["):
        return None
    try:
        value = jsontext.loads(stripped)
    except ValueError:
        return None
    text = _text_of(value)
    return None if text is None else (text, value)


def _text_of(value: Any) -> str | None:
    if isinstance(value, dict):
        for key in TEXT_KEYS:
            inner = value.get(key)
            if isinstance(inner, str):
                return inner
            if isinstance(inner, list) and (text := _text_of(inner)) is not None:
                return text
        return None
    if isinstance(value, list) and value and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in value):
        return "\n".join(p["text"] for p in value)
    return None


def _arguments(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return None


def input_diff(name: str, arguments: str) -> str | None:
    """An edit's input as a diff: Claude Code's Edit / MultiEdit (old → new strings, as a
    unified diff) or an apply_patch input (the patch itself); None for other calls."""
    args = _arguments(arguments)
    if isinstance(args, dict):
        path = str(args.get("file_path") or args.get("path") or "")
        edits = args.get("edits") if isinstance(args.get("edits"), list) else [args]
        pairs = [(e.get("old_string"), e.get("new_string")) for e in edits
                 if isinstance(e, dict)]
        if pairs and all(isinstance(a, str) and isinstance(b, str) for a, b in pairs):
            out = []
            for old, new in pairs:
                out += difflib.unified_diff(old.splitlines(keepends=True),
                                            new.splitlines(keepends=True),
                                            f"a/{path}" if path else "before",
                                            f"b/{path}" if path else "after")
            return "".join(line if line.endswith("\n") else line + "\n" for line in out)
        for key in ("input", "patch"):
            value = args.get(key)
            if isinstance(value, str) and value.lstrip().startswith("*** Begin Patch"):
                return value
        command = args.get("command")
        if (isinstance(command, list) and len(command) >= 2 and command[0] == "apply_patch"
                and isinstance(command[-1], str)):
            return command[-1]
    if name == "apply_patch" and arguments.lstrip().startswith("*** Begin Patch"):
        return arguments
    return None


def path_of(arguments: str) -> str:
    """The file a tool call names (Read's `file_path`, others' `path`), or ""."""
    args = _arguments(arguments) if len(arguments) <= MAX_HIGHLIGHT else None
    if not isinstance(args, dict):
        return ""
    value = args.get("file_path") or args.get("path") or args.get("filename")
    return value if isinstance(value, str) else ""


def json_lexer() -> Lexer:
    return _JSON


def diff_lexer() -> Lexer:
    return _DIFF
