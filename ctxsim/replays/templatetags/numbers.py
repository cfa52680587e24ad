"""Numbers as people read them: `num` groups thousands (45,783), `magnitude` drops the sign so
a template can say "55 tokens added" instead of "−55 tokens saved".

`grouped` is the same formatting for HTML built in Python (the call view's rows).
"""

from __future__ import annotations

from typing import Any

from django import template

register = template.Library()


def grouped(value: Any) -> str:
    """An integer with comma thousands separators; anything else as it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "" if value is None else str(value)
    return f"{value:,}"


@register.filter
def num(value: Any) -> str:
    return grouped(value)


@register.filter
def magnitude(value: Any) -> Any:
    return abs(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
