"""Session titles name the user's first real request, not the agent's boilerplate (issue 19)."""

from __future__ import annotations

import io
import json

import pytest

from ctxsim import importers
from ctxsim.importers.titles import TITLE_CHARS, project_name, request_line
from tests.shared import SHARED_DIR, requires_shared


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("<command-name>/clear</command-name>\n  <command-message>clear</command-message>\n"
         "  <command-args></command-args>", None),
        ("<command-message>orchestrator is running…</command-message>\n"
         "<command-name>/orchestrator</command-name>\n"
         "<command-args>update CLAUDE.md</command-args>",
         "/orchestrator update CLAUDE.md"),
        ("<command-message>init is analyzing your codebase…</command-message>\n"
         "<command-name>init</command-name>\n<command-args></command-args>\n"
         "<command-contents>{\"text\": \"Please analyze\"}</command-contents>",
         "Initialise CLAUDE.md"),
        ("<command-name>/model</command-name><command-args></command-args>", None),
        ("<command-name>/orchestrator</command-name><command-args></command-args>", None),
        ("<command-name>/review</command-name><command-args>42</command-args>",
         "Review a pull request: 42"),
        ("<local-command-stdout></local-command-stdout>", None),
        ("<system-reminder>The TODO list is empty.</system-reminder>\nFix the login bug",
         "Fix the login bug"),
        ("# Context from my IDE setup:\n\n## Open tabs:\n- a.py: a.py\n\n## My request for Codex:\n"
         "I want to migrate this app from\n  supabase to prisma.\n",
         "I want to migrate this app from supabase to prisma."),
        ("# Context from my IDE setup:\n\n## Active file: a.py\n", None),
        ("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>", None),
        ("We're currently solving the following issue within our repository. Here's the issue "
         "text:\nISSUE:\nPixel Representation should be optional\n**Describe the bug**\nIt fails.",
         "Pixel Representation should be optional"),
        ("We're currently solving the following CTF challenge. The CTF challenge is a cryptography "
         'problem named "Katy", worth 10 points. The description is:\ni every1 im new',
         'CTF: cryptography problem named "Katy"'),
        ("Make the <Button> component blue", "Make the <Button> component blue"),
        ("   \n\n", None),
    ],
)
def test_it_titles_a_message_by_its_real_request(text, title):
    assert request_line(text) == title


def test_a_task_command_alone_is_titled_by_its_project():
    init = "<command-name>/init</command-name>\n<command-args></command-args>"
    assert request_line(init, "shop") == "Initialise CLAUDE.md: shop"
    assert project_name("/home/dev/shop/") == "shop"
    assert project_name("C:\\work\\shop") == "shop"


def test_a_claude_code_session_opened_with_init_is_titled_by_it():
    def line(uuid, parent, kind, content):
        return json.dumps({
            "parentUuid": parent, "isSidechain": False, "cwd": "/home/dev/shop",
            "sessionId": "s-1", "type": kind, "uuid": uuid,
            "timestamp": "2026-02-01T09:00:00.000Z",
            "message": {"role": kind, "content": content, **(
                {"id": "m1", "model": "claude-opus-4-5", "usage": {"input_tokens": 3,
                                                                   "output_tokens": 4}}
                if kind == "assistant" else {})}})
    data = "\n".join([
        line("u1", None, "user", "<command-message>init is analyzing your codebase…"
             "</command-message>\n<command-name>/init</command-name>\n"
             "<command-args></command-args>"),
        line("u2", "u1", "assistant", [{"type": "text", "text": "I'll look around."}]),
    ]).encode()
    (session,) = importers.load(io.BytesIO(data)).sessions
    assert session.title == "Initialise CLAUDE.md: shop"


def test_a_long_request_is_shortened_with_an_ellipsis():
    line = request_line("word " * 100)
    assert line is not None and len(line) == TITLE_CHARS and line.endswith("…")


def _shared_transcripts():
    folder = SHARED_DIR / "transcripts"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*/*") if p.suffix not in (".md", ".json") or
                  p.name.endswith(".jsonl") or p.parent.name == "openhands")


@requires_shared
@pytest.mark.shared
def test_no_shared_transcript_is_titled_by_markup_or_ide_context():
    files = [p for p in _shared_transcripts() if p.name != "expected-counts.json"]
    assert files
    for path in files:
        for session in importers.load(path).sessions:
            assert not session.title.startswith("<"), (path.name, session.title)
            assert not session.title.startswith("# Context from my IDE"), (path.name, session.title)
