"""Session titles name the user's first real request, not the agent's boilerplate (issue 19)."""

from __future__ import annotations

import pytest

from ctxsim import importers
from ctxsim.importers.titles import TITLE_CHARS, request_line
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
         "<command-contents>{\"text\": \"Please analyze\"}</command-contents>", None),
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
