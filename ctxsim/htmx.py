"""Small helpers over django-htmx for htmx 4's request headers."""

from __future__ import annotations

from django.http import HttpRequest


def target_id(request: HttpRequest) -> str | None:
    """The id of the element an htmx request will swap, or None for a normal request.

    htmx 4 sends `HX-Target` as `tag#id` (e.g. `div#call-view`); htmx 2 sent the bare id.
    """
    if not getattr(request, "htmx", False):
        return None
    raw = request.htmx.target or ""
    return raw.rpartition("#")[2] or None
