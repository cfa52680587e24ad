"""What a search asks for: its words and quoted phrases, and where a text holds them.

A query is split into terms: each word on its own, and each "quoted phrase" as one term (its
words in that order, any whitespace between them; an unclosed quote runs to the end). A text
matches when it holds every term, in any order, each as a case-insensitive substring: so
`TimeDelta serialization` and `serialization TimeDelta` find the same messages, and
`"TimeDelta serialization"` only those where the two words follow each other. The search page,
the call view's Find and the words a search hit highlights all read a query through `parse`.

Pure Python: no Django, no database.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

MIN_TERM_CHARS = 3  # the SQLite trigram index cannot look up anything shorter
MAX_QUERY_CHARS = 200
SNIPPET_CHARS = 90
# Whitespace a search box may send; it only separates words. Other control characters
# (NUL first: neither database takes it) are refused.
_ALLOWED_CONTROLS = frozenset("\t\n\r")
_TOKEN = re.compile(r'"([^"]*)(?:"|$)|([^\s"]+)')


class SearchError(ValueError):
    """A query that cannot be searched (too short, too long, control characters); the message
    says why."""


@dataclass(frozen=True)
class Terms:
    """The terms of one query, each a tuple of words (one word, or a phrase's words)."""

    terms: tuple[tuple[str, ...], ...]

    @property
    def texts(self) -> list[str]:
        """Each term as the user would read it (a phrase's words joined by one space)."""
        return [" ".join(words) for words in self.terms]

    def index_words(self) -> list[str]:
        """The words an index can look up (MIN_TERM_CHARS or longer): every text that matches
        holds each of them, so an index narrows the search down with no miss."""
        return list(dict.fromkeys(w for words in self.terms for w in words
                                  if len(w) >= MIN_TERM_CHARS))

    def index_terms(self) -> list[str]:
        """The terms an index can look up as phrases (for PostgreSQL's phrase queries)."""
        return [" ".join(words) for words in self.terms
                if len(" ".join(words)) >= MIN_TERM_CHARS]

    def _patterns(self) -> list[re.Pattern[str]]:
        return [re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)
                for words in self.terms]

    def matches(self, text: str) -> bool:
        """Whether `text` holds every term."""
        return all(p.search(text) for p in self._patterns())

    def found_spans(self, text: str) -> list[tuple[int, int]]:
        """Where each term that `text` holds first occurs in it."""
        return [found.span() for p in self._patterns() if (found := p.search(text))]

    def first_spans(self, text: str) -> list[tuple[int, int]] | None:
        """Where each term first occurs in `text`, or None when one of them does not."""
        spans = self.found_spans(text)
        return spans if len(spans) == len(self.terms) else None

    def snippet(self, text: str) -> tuple[tuple[str, bool], ...] | None:
        """A window of `text` around the first occurrence of a term, as (piece, is a match)
        pieces (every term occurring inside the window is a match), or None when `text` does
        not hold every term."""
        firsts = self.first_spans(text)
        if firsts is None:
            return None
        start, end = min(firsts)
        lo, hi = max(0, start - SNIPPET_CHARS), min(len(text), end + SNIPPET_CHARS)
        window = text[lo:hi]
        spans = sorted(m.span() for p in self._patterns() for m in p.finditer(window))
        pieces: list[tuple[str, bool]] = [("…", False)] if lo > 0 else []
        at = 0
        for s, e in spans:
            if e <= at:
                continue
            s = max(s, at)
            if s > at:
                pieces.append((window[at:s], False))
            pieces.append((window[s:e], True))
            at = e
        if at < len(window):
            pieces.append((window[at:], False))
        if hi < len(text):
            pieces.append(("…", False))
        return tuple(_merged(pieces))


def _merged(pieces: Sequence[tuple[str, bool]]) -> list[tuple[str, bool]]:
    out: list[tuple[str, bool]] = []
    for piece, marked in pieces:
        if out and out[-1][1] == marked:
            out[-1] = (out[-1][0] + piece, marked)
        else:
            out.append((piece, marked))
    return out


def refuse_controls(query: str) -> None:
    """SearchError naming the first control character of `query` (tab and newlines are
    whitespace, and pass)."""
    for position, char in enumerate(query, start=1):
        if char not in _ALLOWED_CONTROLS and unicodedata.category(char) == "Cc":
            raise SearchError(
                f"The search holds a control character (U+{ord(char):04X}) at character "
                f"{position}: search for printable text only.")


def parse(query: str, *, indexed: bool = True) -> Terms:
    """The terms of `query`; SearchError when it cannot be searched. An `indexed` search (the
    database's) needs a word an index can look up; one inside a call reads any text."""
    refuse_controls(query)
    if len(" ".join(query.split())) > MAX_QUERY_CHARS:
        raise SearchError(f"A search is at most {MAX_QUERY_CHARS} characters long.")
    terms: list[tuple[str, ...]] = []
    for found in _TOKEN.finditer(query):
        phrase, word = found.groups()
        words = tuple(phrase.split()) if phrase is not None else (word,)
        if words and words not in terms:
            terms.append(words)
    parsed = Terms(tuple(terms))
    if indexed and not parsed.index_words():
        raise SearchError(f"Type at least {MIN_TERM_CHARS} characters to search inside "
                          "contents (a word of 3 or more).")
    return parsed
