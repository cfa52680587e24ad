"""App error pages for answers that come without one (issue 26).

Django answers a GET to a POST-only address (`/logout/` typed in the address bar) with an
empty 405, a view may refuse a request with a one-line text 400, and a user past their replay
limit gets a text 429 (`replays/limits.py`): a browser shows those as a blank or bare page.
`ErrorPageMiddleware` gives such an answer, when a browser navigated to it, the app's layout and
one line of what to do (`error_page.html`), keeping its status and headers (Allow,
Retry-After). htmx requests and the API keep their bodies: the page's banner
(`static/js/errors.js`) and API clients read them.

Placed right after the CSP middleware, so the page's scripts get the response's nonce.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

# status → (heading, what to do); a text body the app wrote replaces the second for 400/429.
PAGES = {
    400: ("Bad request", "The request could not be read. Reload the page and try again."),
    405: ("Not an address to open", "This address is for a button of the app (it only takes "
          "a form's submission): go back and use the button on the page."),
    429: ("Too many at once", "Too many requests at once: wait a few seconds, then reload."),
}
# An address whose button the 405 page can name.
BUTTONS = {"/logout/": "To log out, use the “Log out” button at the top of any page."}


class ErrorPageMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (response.status_code not in PAGES or _is_html(response)
                or request.headers.get("HX-Request") or request.path.startswith("/api/")
                or getattr(response, "streaming", False)):
            return response
        heading, detail = PAGES[response.status_code]
        text = response.content.decode("utf-8", "replace").strip()
        if response.status_code == 405:
            detail = BUTTONS.get(request.path, detail)
        elif text and len(text) <= 2000:
            detail = " ".join(text.split())  # the app's own words (limits.py, a view's refusal)
        response.content = render_to_string("error_page.html", {
            "status": response.status_code, "heading": heading, "detail": detail,
        }, request)
        response["Content-Type"] = "text/html; charset=utf-8"
        return response


def _is_html(response: HttpResponse) -> bool:
    return response.get("Content-Type", "").startswith("text/html") and bool(response.content)
