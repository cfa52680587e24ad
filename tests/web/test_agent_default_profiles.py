"""A session opens with its own agent's profile (SPEC §4, SPEC-agents §2.5.9): Claude Code →
`claude-code`, Codex (both rollout formats) → `codex`, OpenHands (event lists and eval output)
→ `openhands`, every other format → `chatcli`. The page without `profile=`, the list figures
computed after import, the API and `export_trace` all start from it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.urls import reverse

from ctxsim.replays import services
from ctxsim.replays.models import ReplayRun
from ctxsim.replays.state import settings_from_query
from ctxsim.transcripts.imports import finish_import, import_transcript

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent.parent / "importers" / "fixtures"


def _line(kind: str, payload: dict) -> str:
    return json.dumps({"timestamp": "2026-03-01T10:00:00Z", "type": kind, "payload": payload})


def _text(role: str, text: str) -> dict:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


# A current Codex rollout (hand-made from the documented line shapes).
ROLLOUT = "\n".join([
    _line("session_meta", {"id": "s1", "cwd": "/w", "instructions": "You are Codex."}),
    _line("turn_context", {"model": "gpt-5.2-codex"}),
    _line("response_item", _text("user", "list the files")),
    _line("response_item", {"type": "function_call", "name": "shell",
                            "arguments": '{"command":["ls"]}', "call_id": "call_1"}),
    _line("response_item", {"type": "function_call_output", "call_id": "call_1",
                            "output": "a.txt\nb.txt"}),
    _line("response_item", _text("assistant", "two files")),
]) + "\n"

CASES = [
    ("claude-code-compacted.jsonl", "claude-code", "claude-code"),
    ("rollout-2026-03-01T10-00-00-s1.jsonl", "codex", "codex"),
    ("codex-legacy-session-items.json", "codex-legacy", "codex"),
    ("openhands-trajectory-export.json", "openhands", "openhands"),
    ("openhands-eval-output.jsonl", "openhands-eval", "openhands"),
    ("chatcli-session-legacy.json", "chatcli", "chatcli"),
    ("openai-chat-request.json", "openai-chat", "chatcli"),
    ("anthropic-messages-array.json", "anthropic-messages", "chatcli"),
    ("swe-agent-demo-history-only.traj", "swe-agent", "chatcli"),
]


def _imported(personas, tmp_path, name):
    path = FIXTURES / name
    if not path.exists():
        path = tmp_path / name
        path.write_text(ROLLOUT)
    outcome = import_transcript(path, team=personas.team, user=personas.users["owner"])
    finish_import(outcome.sessions)  # what every import does: the list figures follow
    row = outcome.sessions[0]
    row.refresh_from_db()
    return row


@pytest.mark.parametrize(("name", "fmt", "profile"), CASES)
def test_a_session_opens_with_its_own_agents_profile(personas, tmp_path, name, fmt, profile):
    row = _imported(personas, tmp_path, name)
    assert row.format == fmt
    client = personas.client("viewer")
    url = reverse("session-detail", args=[row.pk])
    html = client.get(url).content.decode()
    assert f'name="profile" value="{profile}"' in html

    # The list's peak columns come from that profile's replay, stored for the page too.
    settings, errors = settings_from_query({"profile": profile}, personas.team)
    assert not errors
    run = services.summary_for(row, settings)
    assert (row.peak_raw_tokens, row.peak_sent_tokens) == (run.totals["peak_raw"],
                                                          run.totals["peak_sent"])
    assert set(ReplayRun.objects.filter(session=row).values_list("profile", flat=True)) == {
        profile}
    listing = client.get(reverse("home")).content.decode()
    assert f'{run.totals["peak_raw"]:,} → {run.totals["peak_sent"]:,}' in listing

    out = io.StringIO()
    call_command("export_trace", str(row.pk), "--summary", stdout=out)
    trace = json.loads(out.getvalue())
    assert trace["effective_config"]["profile"] == profile


@pytest.mark.parametrize(("name", "profile"), [("claude-code-compacted.jsonl", "claude-code"),
                                               ("openhands-eval-output.jsonl", "openhands"),
                                               ("openai-chat-request.json", "chatcli")])
def test_the_api_starts_from_the_same_profile(personas, api_tokens, tmp_path, name, profile):
    from django.test import Client

    row = _imported(personas, tmp_path, name)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {api_tokens.read}"}
    detail = Client().get(f"/api/v1/sessions/{row.pk}", **auth).json()
    assert (detail["tokens"]["peak_raw"], detail["tokens"]["peak_sent"]) == (
        row.peak_raw_tokens, row.peak_sent_tokens)
    response = Client().get(f"/api/v1/sessions/{row.pk}/trace?summary=1", **auth)
    assert response.status_code == 200
    trace = json.loads(b"".join(response.streaming_content))
    assert trace["effective_config"]["profile"] == profile
