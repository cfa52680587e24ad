"""`python manage.py seed_demo`: a few generated sessions in the demo team, so the dashboard is
never empty on first run (`make run` calls it right after `bootstrap`).

The sessions come from the project's deterministic generator, written as real transcript files
and imported through the real importers, exactly as an upload would be. Idempotent: a demo
team that already holds sessions is left alone.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from ctxsim.generator import write_claude_code_jsonl
from ctxsim.teams.models import Membership, Role, Team
from ctxsim.transcripts.imports import finish_import, import_transcript
from ctxsim.transcripts.models import Session

DEMO_SLUG = "demo"


def _claude_code(calls: int, seed: int, **options) -> Callable[[IO[str]], None]:
    return lambda out: write_claude_code_jsonl(out, calls, seed, **options)


def _openai_chat(out: IO[str]) -> None:
    """A short OpenAI Chat Completions request body with one tool round trip."""
    arguments = json.dumps({"path": "src/app/budget.py"})
    body = {
        "model": "gpt-5",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "description": "Read a file of the repository",
                    "parameters": {
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                    },
                },
            }
        ],
        "messages": [
            {"role": "system", "content": "You are a careful coding assistant."},
            {"role": "user", "content": "Why does the budget stage spill results twice?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_demo_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": arguments},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_demo_1",
                "content": "def apply_budget(history, limit=20000):\n"
                "    # runs on the outgoing copy, every call\n"
                "    return [spill(m) if len(m) > limit else m for m in history]\n",
            },
            {
                "role": "assistant",
                "content": "The budget runs on the outgoing copy at every call, so an "
                "oversized result is spilled again each time it is sent.",
            },
        ],
    }
    json.dump(body, out, indent=1)


# (file name, writer): the sizes show the pipeline at work: the 150-call session has an
# oversized result every 7th call, so caps and spills happen.
DEMO_FILES: list[tuple[str, Callable[[IO[str]], None]]] = [
    ("demo-40-calls.jsonl", _claude_code(40, 1)),
    ("demo-150-calls-oversized.jsonl", _claude_code(150, 2, oversize_every=7)),
    ("demo-openai-chat.json", _openai_chat),
]


class Command(BaseCommand):
    help = "Seed the demo team with generated sessions (does nothing when it has sessions)."

    def handle(self, *args, **options) -> None:
        team = self._demo_team()
        if team is None:
            self.stdout.write("ctxsim: no user yet to own the demo team; run bootstrap first.")
            return
        if Session.objects.filter(team=team).exists():
            self.stdout.write(f"ctxsim: the {team.name} has sessions already; not seeding.")
            return
        owner = team.memberships.filter(role=Role.OWNER).order_by("pk").first()
        with tempfile.TemporaryDirectory(prefix="ctxsim-demo-") as folder:
            for name, write in DEMO_FILES:
                path = Path(folder) / name
                with path.open("w", encoding="utf-8") as out:
                    write(out)
                outcome = import_transcript(path, team=team, user=owner and owner.user)
                finish_import(outcome.sessions)
                for row in outcome.sessions:
                    self.stdout.write(
                        f"ctxsim: demo session {row.title!r} ({row.model_call_count} model calls, "
                        f"{row.tool_result_count} tool results)"
                    )

    def _demo_team(self) -> Team | None:
        team = Team.objects.filter(slug=DEMO_SLUG).first()
        if team is not None:
            return team
        owner = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        if owner is None:
            return None
        with transaction.atomic():
            team = Team.objects.create(slug=DEMO_SLUG, name="Demo team")
            Membership.objects.create(team=team, user=owner, role=Role.OWNER)
        return team
