"""Numbers as people read them, the one format of every page (issue 26): `num` groups
thousands (45,783), `money` signs and groups dollars (−$90.89; $0.0123 below a dollar, where
cents would round a small session's cost to nothing), `magnitude` drops the sign so a template
can say "55 tokens added" instead of "−55 tokens saved", `numbers_in` groups the numbers of a
sentence (stage reports, notes).

`grouped` and `dollars` are the same formatting for text built in Python (the call view's rows,
notes); `static/js/numbers.js` is the same for the charts. Negative numbers take the minus sign
(U+2212), as typeset text does.
"""

from __future__ import annotations

import re
from typing import Any

from django import template

register = template.Library()


MINUS = "\u2212"


def grouped(value: Any) -> str:
    """A number with comma thousands separators (a fraction to at most two places); anything
    else as it is."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return "" if value is None else str(value)
    text = f"{value:,}" if isinstance(value, int) else f"{value:,.2f}".rstrip("0").rstrip(".")
    return text.replace("-", MINUS, 1)


def dollars(value: Any) -> str:
    """An amount of dollars, signed before the symbol: "$1,234.57", "−$90.89", "$0.0123"."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return "" if value is None else str(value)
    places = 2 if abs(value) >= 1 or value == 0 else 4
    text = f"${abs(value):,.{places}f}"
    return MINUS + text if value < 0 and text.strip("$0.,") else text


# A whole number of four digits or more standing on its own: not part of a name, a path, a
# version or a setting (`X=20000`), which keep their digits as written. A sentence's full stop
# after it is no part of it ("below the threshold 167000.").
MAX_GROUPED_DIGITS = 18
_NUMBER = re.compile(r"(?<![\w.=/:@+-])(-?)(\d{4,})(?![\w=/:@+]|-\d|\.\w)")


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
def money(value: Any) -> str:
    return dollars(value)


@register.filter
def magnitude(value: Any) -> Any:
    return abs(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


@register.filter
def numbers_in(value: Any) -> Any:
    """`group_numbers` for a text (autoescaping still applies to the result)."""
    return group_numbers(value) if isinstance(value, str) else value
