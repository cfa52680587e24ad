"""Bodies over their limit are refused from their declared length, before anything reads them.

Django parses a POST body the first time something reads `request.POST` (the CSRF check does,
before any view), spooling file parts to disk: a 600 MB POST to the login page made 450+ MB of
temporary files before its answer (issue 20 item 9). This middleware answers 413 first:

- anonymous visitors only send a login or sign-up form: `ANONYMOUS_MAX_BYTES`;
- the REST API (`/api/`) authenticates by token, not by session: it gets the upload's limit here
  and answers 401/403/413 itself, before it reads the body;
- a member's upload: `CTXSIM_MAX_REQUEST_BYTES` (one file at the per-file limit plus the form);
- any other member's POST is a form: `DATA_UPLOAD_MAX_MEMORY_SIZE` plus room for its encoding.

The declared length is also what can be read: the WSGI request stream stops at
`CONTENT_LENGTH` (Django's LimitedStream), and a body without one is read as empty.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

ANONYMOUS_MAX_BYTES = 64 * 1024
FORM_OVERHEAD_BYTES = 64 * 1024
API_PREFIX = "/api/"


def _size_text(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MB"
    return f"{size // 1024} KB"


class RequestSizeLimitMiddleware:
    """413 for a request whose declared body is over what its sender may send. Place it after
    AuthenticationMiddleware (it asks who is sending only for bodies past the anonymous size);
    every middleware's request phase runs before the CSRF check reads the body."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0  # Django reads such a body as empty
        if declared > ANONYMOUS_MAX_BYTES:
            limit = self.limit_for(request)
            if declared > limit:
                return self.refuse(request, f"The request is too large: {_size_text(declared)}, "
                                            f"over the {_size_text(limit)} this page accepts.")
        return self.get_response(request)

    @staticmethod
    def refuse(request: HttpRequest, message: str) -> HttpResponse:
        """The API answers in its own JSON shape; a page answers in the app's layout (the
        body is never read, so nothing of it can reach the template)."""
        if request.path.startswith(API_PREFIX):
            return JsonResponse({"detail": message}, status=413)
        return render(request, "413.html", {"detail": message}, status=413)

    @staticmethod
    def limit_for(request: HttpRequest) -> int:
        if request.path.startswith(API_PREFIX):
            return settings.CTXSIM_MAX_REQUEST_BYTES
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return ANONYMOUS_MAX_BYTES
        if request.path == reverse("upload"):
            return settings.CTXSIM_MAX_REQUEST_BYTES
        return settings.DATA_UPLOAD_MAX_MEMORY_SIZE + FORM_OVERHEAD_BYTES
