"""Numbers as people read them: `num` groups thousands (45,783), `magnitude` drops the sign so
a template can say "55 tokens added" instead of "−55 tokens saved", `numbers_in` groups the
numbers of a sentence (stage reports, notes).

`grouped` is the same formatting for HTML built in Python (the call view's rows).
"""

from __future__ import annotations

import re
from typing import Any

from django import template

register = template.Library()


def grouped(value: Any) -> str:
    """An integer with comma thousands separators; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "" if value is None else str(value)
    return f"{value:,}"


# A whole number of four digits or more standing on its own: not part of a name, a path, a
# version or a setting (`X=20000`), which keep their digits as written.
MAX_GROUPED_DIGITS = 18
_NUMBER = re.compile(r"(?<![\w.=/:@+-])(-?)(\d{4,})(?![\w.=/:@+]|-\d)(?!\.\d)")


def group_numbers(text: str) -> str:
    """Prose with its standalone numbers grouped ("558346 → 266151 bytes" reads
    "558,346 → 266,151 bytes")."""
    return _NUMBER.sub(_group_match, text)


def _group_match(match: re.Match[str]) -> str:
    digits = match.group(2)
    if len(digits) > MAX_GROUPED_DIGITS:  # an id or a hostile value: int() would refuse it
        return match.group(0)
    return match.group(1) + f"{int(digits):,}"


@register.filter
def num(value: Any) -> str:
    return grouped(value)


@register.filter
def magnitude(value: Any) -> Any:
    return abs(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


@register.filter
def numbers_in(value: Any) -> Any:
    """`group_numbers` for a text (autoescaping still applies to the result)."""
    return group_numbers(value) if isinstance(value, str) else value
