"""The one error type importers raise: a single line a user can act on."""

from __future__ import annotations

from typing import Any


class TranscriptError(ValueError):
    """A transcript cannot be imported; `str(error)` is one line for the user.

    `line` and `column` are 1-based positions in the file when the problem has one. Importers
    raise it before returning anything, so a failed import never yields a partial session.
    `details` are further one-line facts behind the message (for an unknown format: why each
    format did not match), which the upload page shows collapsed and the API as a list.
    """

    def __init__(self, reason: str, *, line: int | None = None, column: int | None = None,
                 details: tuple[str, ...] | list[str] = ()):
        # Messages travel into one-line CLI output and HTML lists: never let a newline through.
        self.reason = " ".join(reason.split())
        self.line = line
        self.column = column
        self.details = tuple(" ".join(d.split()) for d in details)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if self.line is None:
            return self.reason
        where = f"line {self.line}" if self.column is None else (
            f"line {self.line}, column {self.column}"
        )
        return f"{where}: {self.reason}"

    def __str__(self) -> str:
        return self.message

    def with_details(self) -> str:
        """The message, then each detail on a line of its own (the message itself never holds
        a newline): for a text field that keeps both, such as a background job's message."""
        return "\n".join((self.message, *self.details))


class Near(str):
    """A detection verdict saying the file *nearly* is this format: its signature is there but
    something else did not match. The unknown-format message names the nearest such format
    (higher `score` first) and says what did not match."""

    score: int

    def __new__(cls, reason: str, score: int = 1) -> Near:
        verdict = super().__new__(cls, reason)
        verdict.score = score
        return verdict


def type_name(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages about wrong shapes."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def wrong_shape(field: str, expected: str, got: Any, *, line: int | None = None) -> TranscriptError:
    """`field` names the path inside the record (e.g. `message.content`)."""
    return TranscriptError(f"`{field}` should be {expected}, not {type_name(got)}", line=line)
