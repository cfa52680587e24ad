"""The one way a view answers a page or one of its partials, over django-htmx.

A page template owns its fragments (`{% partialdef name inline %}`). A view calls
`render_page_or_partial` with the partial an htmx request gets:

- a name: every htmx request gets that partial (the page has one region that htmx reloads);
- a mapping from DOM id to partial name: the partial for the element the request swaps (its
  `HX-Target`), so one page serves several regions; a request for any other element, or one
  without htmx, gets the whole page.

Response headers (push a URL, retarget, client redirect) come from `django_htmx.http`.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def target_id(request: HttpRequest) -> str | None:
    """The id of the element an htmx request will swap, or None for a normal request.

    htmx 4 sends `HX-Target` as `tag#id` (e.g. `div#call-view`); htmx 2 sent the bare id.
    """
    if not getattr(request, "htmx", False):
        return None
    raw = request.htmx.target or ""
    return raw.rpartition("#")[2] or None


def partial_for(request: HttpRequest, partials: str | Mapping[str, str]) -> str | None:
    """The partial this request asks for (see the module docstring), or None for the page."""
    if not getattr(request, "htmx", False):
        return None
    if isinstance(partials, str):
        return partials
    return partials.get(target_id(request) or "")


def render_page_or_partial(
    request: HttpRequest,
    template: str,
    partials: str | Mapping[str, str],
    context: Mapping[str, object],
    *,
    status: int | None = None,
) -> HttpResponse:
    """`template`, or `template#<partial>` when the request is an htmx one for a partial."""
    name = partial_for(request, partials)
    return render(request, f"{template}#{name}" if name else template, context, status=status)
