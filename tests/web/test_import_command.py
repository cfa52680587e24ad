"""`manage.py import_transcript` (SPEC §6): a JSON line per session, FILE: message, exit 2."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from ctxsim.generator import write_claude_code_jsonl
from ctxsim.teams.models import Membership, Role, Team
from ctxsim.transcripts.models import Content, Message, Session
from tests.shared import SHARED_DIR, requires_shared

pytestmark = pytest.mark.django_db

KEYS = ["session", "title", "format", "messages", "tool_calls", "tool_results"]



@pytest.fixture
def generated(tmp_path) -> Path:
    path = tmp_path / "generated.jsonl"
    with path.open("w") as out:
        write_claude_code_jsonl(out, 5, 11)
    return path


def run(*args) -> tuple[list[dict], str, int]:
    out, err = StringIO(), StringIO()
    code = 0
    try:
        call_command("import_transcript", *args, stdout=out, stderr=err)
    except SystemExit as exit:
        code = exit.code
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return lines, err.getvalue(), code


def test_it_prints_one_json_line_per_session(personas, generated):
    lines, err, code = run(str(generated), "--team", "alpha")
    assert code == 0 and err == ""
    assert len(lines) == 1
    assert list(lines[0])[:6] == KEYS
    session = Session.objects.get(pk=lines[0]["session"])
    assert session.team == personas.team
    assert lines[0]["format"] == "claude-code"
    assert lines[0]["messages"] == session.message_count
    assert lines[0]["tool_calls"] == session.tool_call_count > 0
    assert lines[0]["tool_results"] == session.tool_result_count


def test_a_failed_file_is_one_stderr_line_and_exit_2(personas, generated, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [}')
    lines, err, code = run(str(bad), str(generated), "--team", "alpha")
    assert code == 2
    assert len(lines) == 1  # the good file is still imported
    assert err.count("\n") == 1
    assert err.startswith(f"{bad}: line 1, column ")
    assert Session.objects.count() == 1


def test_an_unknown_format_is_one_line_and_its_reasons_with_verbosity_2(personas, tmp_path):
    odd = tmp_path / "odd.json"
    odd.write_text('{"hello": 1}')
    _, err, code = run(str(odd), "--team", "alpha")
    assert code == 2 and err.count("\n") == 1 and "unknown transcript format" in err
    _, err, code = run(str(odd), "--team", "alpha", "-v", "2")
    assert err.count("\n") > 20 and "\n  mini-swe-agent: " in err


def test_a_missing_file_is_reported_like_a_bad_one(personas, tmp_path):
    before = (Session.objects.count(), Message.objects.count(), Content.objects.count())
    lines, err, code = run(str(tmp_path / "nope.jsonl"), "--team", "alpha")
    assert code == 2 and lines == []
    assert err.startswith(f"{tmp_path / 'nope.jsonl'}: ")
    assert (Session.objects.count(), Message.objects.count(), Content.objects.count()) == before


def test_a_missing_team_is_created_owned_by_the_given_user(personas, generated):
    lines, _, code = run(str(generated), "--team", "new-team", "--user", "viewer")
    assert code == 0
    team = Team.objects.get(slug="new-team")
    assert Membership.objects.get(team=team).user == personas.users["viewer"]
    assert Membership.objects.get(team=team).role == Role.OWNER
    assert Session.objects.get(pk=lines[0]["session"]).uploaded_by == personas.users["viewer"]


def test_without_user_the_first_superuser_owns_the_new_team(personas, generated):
    admin = get_user_model().objects.create_superuser("root", password="x-pass-123")
    run(str(generated), "--team", "fresh")
    assert Membership.objects.get(team__slug="fresh").user == admin


def test_a_new_team_needs_someone_to_own_it(db, generated):
    with pytest.raises(CommandError) as error:
        call_command("import_transcript", str(generated), "--team", "orphan")
    assert error.value.returncode == 2
    assert not Team.objects.exists()


def test_an_unknown_user_is_an_error(personas, generated):
    with pytest.raises(CommandError, match="no user named"):
        call_command("import_transcript", str(generated), "--team", "alpha", "--user", "ghost")


def test_the_format_can_be_forced(personas, generated):
    _, err, code = run(str(generated), "--team", "alpha", "--format", "codex")
    assert code == 2 and err.startswith(f"{generated}: ")
    lines, _, code = run(str(generated), "--team", "alpha", "--format", "claude-code")
    assert code == 0 and lines[0]["format"] == "claude-code"


@requires_shared
def test_every_shared_transcript_imports_with_the_expected_counts(personas):
    expected = json.loads((SHARED_DIR / "transcripts" / "expected-counts.json").read_text())
    for name, counts in expected.items():
        lines, err, code = run(str(SHARED_DIR / "transcripts" / name), "--team", "alpha")
        assert code == 0, err
        got = {
            "sessions": len(lines),
            "tool_calls": sum(line["tool_calls"] for line in lines),
            "tool_results": sum(line["tool_results"] for line in lines),
        }
        assert got == counts, name


def test_seed_demo_fills_the_demo_team_once_through_the_importers(db):
    from ctxsim.transcripts.models import ImportJob

    admin = get_user_model().objects.create_superuser("admin", password="x-pass-123")
    call_command("seed_demo", stdout=StringIO())
    team = Team.objects.get(slug="demo")
    assert Membership.objects.get(team=team).user == admin
    sessions = Session.objects.filter(team=team)
    assert sorted(sessions.values_list("format", flat=True)) == [
        "claude-code", "claude-code", "openai-chat"
    ]
    assert sessions.filter(model_call_count=150).exists()
    assert all(s.uploaded_by == admin for s in sessions)
    again = StringIO()
    call_command("seed_demo", stdout=again)
    assert "not seeding" in again.getvalue()
    assert Session.objects.filter(team=team).count() == 3
    assert not ImportJob.objects.exists()


def test_seed_demo_without_any_user_does_nothing(db):
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "run bootstrap first" in out.getvalue()
    assert not Session.objects.exists()
