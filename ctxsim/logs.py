"""What a log line may not print: invite tokens and secrets in query strings (issue 28 items
9 and 10).

An invite link is a credential (whoever reads it joins the team), and Django's own lines
print the path: `Forbidden (CSRF cookie not set.): /invites/<token>/`, `Not Found: …`, the
development server's request line. A query string is untrusted text that may hold a secret
(an API client sending `?name=sk-ant-…`). `redact_line` cuts both out of any text;
`RedactFilter` applies it to every record a handler writes (settings `LOGGING`), and
gunicorn's access log applies it to its fields (`deploy/gunicorn.conf.py`).

Secrets are found by the import's patterns (`ctxsim.importers.redact`) in the URL-decoded
query, so `%2D` cannot hide a dash from them; a query without a secret is logged as sent.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import quote, unquote_plus

from ctxsim.importers.redact import redact_text

INVITE_TOKEN = re.compile(r"(/invites/)[^/?#\s\"']+")
_QUERY = re.compile(r"\?([^\s\"'#]+)")
# What a redacted query keeps unescaped, so the log stays readable.
_QUERY_SAFE = "=&;/:,[]"


def redact_query(query: str) -> str:
    """A query string (without its `?`) with every secret in it replaced, or as given."""
    decoded = unquote_plus(query)
    redacted, found = redact_text(decoded)
    return quote(redacted, safe=_QUERY_SAFE) if found else query


def redact_line(text: str) -> str:
    """`text` with invite tokens replaced by `[token]` and secrets cut from query strings."""
    if "/invites/" in text:
        text = INVITE_TOKEN.sub(r"\1[token]", text)
    if "?" in text:
        text = _QUERY.sub(lambda m: "?" + redact_query(m.group(1)), text)
    return text


class RedactFilter(logging.Filter):
    """Rewrites a record's message through `redact_line` (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 (a bad format is the handler's to report)
            return True
        redacted = redact_line(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
