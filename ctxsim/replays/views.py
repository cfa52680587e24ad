"""The session page: replay chart, call stepper, call view, thresholds (SPEC §8)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ctxsim.teams.access import get_scoped
from ctxsim.transcripts.models import Session


def session_page(request: HttpRequest, session_id: int) -> HttpResponse:
    session, membership = get_scoped(Session.objects.all(), request.user, pk=session_id)
    return render(request, "replays/session.html", {"session": session})
