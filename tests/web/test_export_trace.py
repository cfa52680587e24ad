"""A stored session replays exactly like the file it was imported from (SPEC §6)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from ctxsim import cli
from ctxsim.transcripts.imports import import_transcript
from tests.shared import SHARED_DIR, requires_shared

pytestmark = [pytest.mark.django_db, requires_shared]

SAMPLES = [
    "claude-code-jsonl/claude-reliability__coverage-test-fix__transcript.jsonl",
    "claude-code-jsonl/ccviewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
    "codex-rollout/agentcmd__rollout-2025-09-24T20-12-23-01997ea4-a70d-7da3-8c20-c736db82a7c5.jsonl",
    "swe-agent-traj/swe-agent__human_thought__humanevalfix-python-0.traj",
    "openhands/openhands__runtime-trajs-wrong_initial_state.json",
]


def simulate(path, *args) -> dict:
    out, err = io.StringIO(), io.StringIO()
    assert cli.main([str(path), *args], out, err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def export_trace(session_id: int, *args) -> dict:
    out = io.StringIO()
    call_command("export_trace", str(session_id), *args, stdout=out)
    return json.loads(out.getvalue())


@pytest.mark.parametrize("sample", SAMPLES)
@pytest.mark.parametrize("profile", ["chatcli", "chatcli-aivax"])
def test_export_trace_of_a_stored_session_equals_simulate_on_its_file(personas, sample, profile):
    path = SHARED_DIR / "transcripts" / sample
    rows = import_transcript(path, team=personas.team).sessions
    for k, row in enumerate(rows):
        expected = simulate(path, "--profile", profile, "--session", str(k))
        assert export_trace(row.pk, "--profile", profile) == expected


def test_export_trace_summary_and_config_apply(personas, tmp_path):
    path = SHARED_DIR / "transcripts" / SAMPLES[0]
    row = import_transcript(path, team=personas.team).sessions[0]
    config = tmp_path / "params.json"
    config.write_text(json.dumps({"env": {"CHATCLI_TOOL_RESULT_MAX_CHARS": "300"}}))
    out = tmp_path / "trace.json"
    call_command("export_trace", str(row.pk), "--profile", "chatcli", "--config", str(config),
                 "--summary", "--out", str(out))
    trace = json.loads(out.read_text())
    assert trace["effective_config"]["per_result_max_chars"] == 300
    assert all("history" not in call["budget"] for call in trace["calls"])
    assert trace == simulate(path, "--config", str(config), "--summary")


def test_export_trace_names_a_missing_session_and_exits_2(personas):
    with pytest.raises(CommandError, match="no session with id 999999") as error:
        call_command("export_trace", "999999")
    assert error.value.returncode == 2


@pytest.mark.parametrize("sample", SAMPLES[:3])
def test_a_trace_after_the_page_stored_its_calibration_still_equals_simulate(personas, sample):
    """The download reuses the summary's stored calibration (SPEC §11): same numbers."""
    from django.urls import reverse

    path = SHARED_DIR / "transcripts" / sample
    row = import_transcript(path, team=personas.team).sessions[0]
    client = personas.client("viewer")
    assert client.get(reverse("session-detail", args=[row.pk]) + "?profile=chatcli",
                      follow=True).status_code == 200
    trace = export_trace(row.pk, "--profile", "chatcli")
    assert trace["calibration"] is not None
    assert trace == simulate(path, "--profile", "chatcli")
