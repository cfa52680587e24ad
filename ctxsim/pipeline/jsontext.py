"""`json.loads` whose only failures are `JSONDecodeError`s.

Python refuses to convert an integer of more than `sys.get_int_max_str_digits()` digits (4300
by default) and `json.loads` lets that `ValueError` escape with no position: every caller that
handles `JSONDecodeError` then crashed on such a number in a transcript, a scenario or a pasted
profile (issue 20 item 14). Here it becomes a `JSONDecodeError` at the number, so each caller's
one-line "where and what" message covers it.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

# A JSON number starts after one of these (and optional whitespace); the digit run that breaks
# the conversion is the first one this long in that position.
_LONG_INTEGER = r"(?:^|[\[:,])\s*-?(\d{%d,})"


def loads(text: str | bytes | bytearray) -> Any:
    """`json.loads(text)`; an integer too long for Python raises `JSONDecodeError` at it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            raise
        doc = text if isinstance(text, str) else bytes(text).decode("utf-8", "replace")
        limit = sys.get_int_max_str_digits()
        found = re.search(_LONG_INTEGER % (limit + 1), doc)
        raise json.JSONDecodeError(f"a number has more than {limit} digits", doc,
                                   found.start(1) if found else 0) from None
