"""Secret redaction on import (SPEC §12): a high-precision pattern list, applied before anything
is stored or counted. Pure Python (no Django).

Every match is replaced by `[REDACTED:<kind>]` (for passwords in URLs, connection strings and
`Authorization:` headers only the secret part; the scheme, user and header name stay readable).
The patterns are chosen so that a replacement never crosses a JSON string boundary or splits
an escape sequence: none of them matches a `"` or a backslash inside the secret. That makes the
same list safe on the raw bytes of a JSON or JSON Lines file (what a background import stores)
and on the decoded text of canonical messages (which also catches secrets the raw pass could
not see, e.g. written with `\\/` or `\\u` escapes).

Public API: `KINDS`, `redact_text`, `redact_bytes`, `redact_raw_line`, `redact_lines`,
`redact_value`, `redact_sessions`, `merge_counts`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from ctxsim.pipeline.messages import Message, Session, ToolCall

# (kind, pattern, group holding the secret or 0 for the whole match, needles). A rule runs
# only on text holding one of its needles (a substring test is far cheaper than the regex, and
# most text has none); lower-case needles of a case-insensitive rule are looked for in the
# lower-cased text. Order matters where two patterns could see the same text: Anthropic keys
# start with "sk-" too.
_PEM_BODY = r"(?:[A-Za-z0-9+/=\s:,-]|\\[nrt])"
_RULES: tuple[tuple[str, str, int, tuple[str, ...]], ...] = (
    ("private-key",
     r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----[^\"]{0,20000}?-----END \1PRIVATE KEY-----",
     0, ("PRIVATE KEY",)),
    # A block cut off before its END line (a truncated tool output): the header and its body.
    ("private-key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----" + _PEM_BODY + "{16,20000}",
     0, ("PRIVATE KEY",)),
    ("aws-access-key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
     0, ("AKIA", "ASIA", "ABIA", "ACCA")),
    ("aws-secret-key",
     r"(?i)\baws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
     1, ("secret",)),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
     0, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    ("gitlab-token", r"\bgl(?:pat|dt|ptt|rt|cbt|oas)-[A-Za-z0-9_-]{20,}",
     0, ("glpat-", "gldt-", "glptt-", "glrt-", "glcbt-", "gloas-")),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", 0, ("xox",)),
    ("slack-token", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
     0, ("hooks.slack.com",)),
    ("stripe-key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}", 0, ("_live_", "_test_")),
    ("anthropic-key", r"\bsk-ant-(?:api|admin|oat)\d{0,3}-[A-Za-z0-9_-]{20,}", 0, ("sk-ant-",)),
    ("openai-key",
     r"\bsk-(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}"
     r"|[A-Za-z0-9]{48}\b)",
     0, ("sk-",)),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", 0, ("eyJ",)),
    # "://" also as JSON may write it, ":\/\/", so the raw-file pass sees it too.
    ("password-in-url",
     r"(?i)\b[a-z][a-z0-9+.-]{1,20}:(?://|\\/\\/)[^\s:/@\"'\\<>]{1,200}:"
     r"(?!\[REDACTED:)([^\s:/@\"'\\<>]{1,200})@(?=[A-Za-z0-9\[])",
     1, ("://", ":\\/\\/")),
    ("connection-string-password",
     r"(?i)(?:^|[;\s\"'])(?:password|pwd)\s*=\s*(?!\[REDACTED:)([^;\s\"'\\]{1,200})"
     r"(?=;|$|[\s\"'\\])",
     1, ("password", "pwd")),
    ("authorization-header",
     r"(?i)\b(?:proxy-)?authorization[\"']?\s*:\s*[\"']?(?:(?:bearer|basic|token|digest)\s+)?"
     r"([A-Za-z0-9._~+/=-]{8,})",
     1, ("authorization",)),
)

KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule[0] for rule in _RULES))


def _compiled(as_bytes: bool) -> list[tuple[str, re.Pattern[Any], int, tuple[Any, ...], Any]]:
    rules: list[tuple[str, re.Pattern[Any], int, tuple[Any, ...], Any]] = []
    for kind, pattern, group, needles in _RULES:
        marker = f"[REDACTED:{kind}]"
        lowered = tuple(n.lower() for n in needles)
        if as_bytes:
            rules.append((kind, re.compile(pattern.encode(), re.MULTILINE), group,
                          tuple(n.encode() for n in lowered), marker.encode()))
        else:
            rules.append((kind, re.compile(pattern, re.MULTILINE), group, lowered, marker))
    return rules


_TEXT_RULES = _compiled(as_bytes=False)
_BYTE_RULES = _compiled(as_bytes=True)
# One scan for any needle first, in the lower-cased text (a case-sensitive alternation of
# literals is about ten times faster than a case-insensitive one): most strings hold none.
_NEEDLES = sorted({n.lower() for rule in _RULES for n in rule[3]}, key=len, reverse=True)
_TEXT_GATE = re.compile("|".join(re.escape(n) for n in _NEEDLES))
_BYTE_GATE = re.compile(_TEXT_GATE.pattern.encode())
SHORTEST_SECRET = 5  # the shortest text any rule matches: "pwd=x"


def _apply(text: Any, rules: list[Any],
           seen: list[tuple[str, str]] | None = None) -> tuple[Any, Counter[str]]:
    counts: Counter[str] = Counter()
    if len(text) < SHORTEST_SECRET:
        return text, counts
    lower = text.lower()
    if not (_BYTE_GATE if isinstance(text, bytes) else _TEXT_GATE).search(lower):
        return text, counts
    for kind, pattern, group, needles, marker in rules:
        if lower is None:
            lower = text.lower()
        if not any(needle in lower for needle in needles):
            continue

        def substitute(match: re.Match[Any], kind: str = kind, group: int = group,
                       marker: Any = marker) -> Any:
            counts[kind] += 1
            if seen is not None:
                secret = match.group(group)
                seen.append((kind, secret.decode("utf-8", "replace")
                             if isinstance(secret, bytes) else secret))
            if group == 0:
                return marker
            start, end = match.start(group) - match.start(), match.end(group) - match.start()
            whole = match.group(0)
            return whole[:start] + marker + whole[end:]

        text, replaced = pattern.subn(substitute, text)
        if replaced:
            lower = None  # the markers changed the text
    return text, counts


def redact_text(text: str, seen: list | None = None) -> tuple[str, Counter[str]]:
    """The text with every secret replaced, and how many of each kind were replaced; `seen`,
    when given, collects each (kind, secret) found."""
    return _apply(text, _TEXT_RULES, seen)


def redact_bytes(data: bytes, seen: list | None = None) -> tuple[bytes, Counter[str]]:
    """The same on bytes (a raw file line, or a content that may hold invalid UTF-8: the bytes
    outside the matches are kept exactly)."""
    return _apply(data, _BYTE_RULES, seen)


# A shortened copy of a secret (a title cut to its first characters and "…") no longer
# matches its pattern; a prefix this long of a secret found elsewhere is cut out too.
MIN_CUT_PREFIX = 8
_CUT_ENDS = ("…", "...", "")


def _cut_secrets(text: str, seen: list[tuple[str, str]]) -> str:
    for kind, secret in seen:
        if len(secret) < MIN_CUT_PREFIX:
            continue
        start = text.find(secret[:MIN_CUT_PREFIX])
        while start >= 0:
            length = MIN_CUT_PREFIX
            while (start + length < len(text) and length < len(secret)
                   and text[start + length] == secret[length]):
                length += 1
            rest = text[start + length:]
            if any(rest.startswith(end) and (end or not rest) for end in _CUT_ENDS):
                marker = f"[REDACTED:{kind}]"
                text = text[:start] + marker + rest
                start += len(marker)
            else:
                start += 1
            start = text.find(secret[:MIN_CUT_PREFIX], start)
    return text


def _cut_value(value: Any, seen: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        return _cut_secrets(value, seen)
    if isinstance(value, Mapping):
        return {k: _cut_value(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cut_value(item, seen) for item in value]
    return value


# A JSON string literal holding at least one escape. Scanning from a closing quote can never
# match: outside strings valid JSON holds no backslash before the next quote.
_ESCAPED_STRING = re.compile(rb'"[^"\\\n]*(?:\\.[^"\\\n]*)+"')


def redact_raw_line(line: bytes) -> tuple[bytes, Counter[str]]:
    """One raw line of a stored file redacted: the byte pass, then every JSON string literal
    with escapes decoded and redacted as text (issue 28 item 9: `\\nAuthorization: Bearer …`
    has no word boundary before the header's name in the raw bytes, and `sk\\u002dant…` no
    dash). A literal with a secret is written back with `json.dumps`, escapes and all; every
    byte outside it is kept exactly. A line that is not JSON loses nothing either: a literal
    that does not decode is left to the byte pass."""
    line, counts = redact_bytes(line)
    if b"\\" not in line:
        return line, counts

    def literal(match: re.Match[bytes]) -> bytes:
        raw = match.group(0)
        if not (b"\\u" in raw or _BYTE_GATE.search(raw.lower())):
            return raw  # no escape can hide a needle, and none is in plain sight
        try:
            text = json.loads(raw)
        except ValueError:
            return raw
        redacted, found = redact_text(text)
        if not found:
            return raw
        counts.update(found)
        return json.dumps(redacted, ensure_ascii=False).encode("utf-8", "surrogatepass")

    return _ESCAPED_STRING.sub(literal, line), counts


def redact_lines(lines: Iterable[bytes]) -> Iterator[tuple[bytes, Counter[str]]]:
    """Each raw line redacted (`redact_raw_line`), with its counts; for streaming a stored
    file through the patterns."""
    for line in lines:
        yield redact_raw_line(line)


def redact_value(value: Any, counts: Counter[str], seen: list | None = None) -> Any:
    """A JSON-like value with every string redacted (keys too); adds to `counts`."""
    if isinstance(value, str):
        text, found = redact_text(value, seen)
        counts.update(found)
        return text
    if isinstance(value, Mapping):
        return {redact_value(k, counts, seen): redact_value(v, counts, seen)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(item, counts, seen) for item in value]
    return value


def _redact_message(message: Message, counts: Counter[str], seen: list) -> Message:
    content, found = redact_bytes(message.content, seen)
    counts.update(found)
    calls = tuple(
        ToolCall(
            id=redact_value(call.id, counts, seen),
            name=redact_value(call.name, counts, seen),
            arguments=redact_value(call.arguments, counts, seen),
            type=call.type,
        )
        for call in message.tool_calls
    )
    meta = message.meta
    if meta:
        meta = _cut_value(redact_value(dict(meta), counts, seen), seen)
    return replace(
        message,
        content=content,
        name=redact_value(message.name, counts, seen),
        tool_calls=calls,
        tool_call_id=redact_value(message.tool_call_id, counts, seen),
        error_code=redact_value(message.error_code, counts, seen),
        meta=meta,
    )


def redact_sessions(sessions: Iterable[Session]) -> tuple[list[Session], Counter[str]]:
    """Every field of every session that comes from the transcript, redacted.

    Guarantee: no string a stored session row or message row is built from still matches a
    rule; the counts say how many secrets of each kind were replaced.
    """
    counts: Counter[str] = Counter()
    # The title and the meta mostly repeat what the messages say (a title is the first request):
    # redacted, but not counted again, so the count is of secrets, not of copies.
    # Shortened copies (a title cut with "…") are cut out by the prefix of a secret found in
    # the messages.
    copies: Counter[str] = Counter()
    redacted = []
    for session in sessions:
        seen: list[tuple[str, str]] = []
        messages = tuple(_redact_message(m, counts, seen) for m in session.messages)
        tools = redact_value(session.tools, counts, seen)
        schema = redact_value(session.response_schema, counts, seen)
        title = redact_value(session.title, copies, seen)
        meta = redact_value(dict(session.meta), copies, seen)
        warnings = redact_value(list(session.warnings), copies, seen)
        redacted.append(
            replace(
                session,
                title=_cut_secrets(title, seen),
                messages=messages,
                tools=tools,
                response_schema=schema,
                meta=_cut_value(meta, seen),
                warnings=tuple(_cut_value(warnings, seen)),
            )
        )
    return redacted, counts


def merge_counts(*parts: Mapping[str, int] | None) -> dict[str, int]:
    """Counts added up by kind, in `KINDS` order, without zeros (what a session stores)."""
    total: Counter[str] = Counter()
    for part in parts:
        if part:
            total.update({k: int(v) for k, v in part.items()})
    return {kind: total[kind] for kind in sorted(total, key=_kind_order) if total[kind]}


def _kind_order(kind: str) -> tuple[int, str]:
    return (KINDS.index(kind), kind) if kind in KINDS else (len(KINDS), kind)
