"""The hooks in contrib/ against the live test server (SPEC §12): `ctxsim-push` run as a real
process, with Claude Code's and Codex's hook JSON on stdin."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

import pytest

from ctxsim.api.models import ReceivedFile
from ctxsim.api.tokens import create_token
from ctxsim.generator import write_claude_code_jsonl
from ctxsim.transcripts.models import Session
from loadtest.run import free_port

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
PUSH = ROOT / "contrib" / "bin" / "ctxsim-push"
SESSION_ID = "00000000-0000-4000-8000-000000000001"  # what the generator writes


def claude_session(folder: Path) -> tuple[Path, Path]:
    """A main transcript and one subagent file beside it, as Claude Code lays them out."""
    main = folder / f"{SESSION_ID}.jsonl"
    out = StringIO()
    write_claude_code_jsonl(out, 4, 11)
    main.write_text(out.getvalue())
    agent_out = StringIO()
    write_claude_code_jsonl(agent_out, 3, 12)
    agent_lines = []
    for line in agent_out.getvalue().splitlines():
        record = json.loads(line)
        if record.get("type") == "summary":
            continue
        record.update(isSidechain=True, agentId="a1b2c3d4", sessionId=SESSION_ID)
        agent_lines.append(json.dumps(record))
    agent = folder / "agent-a1b2c3d4.jsonl"
    agent.write_text("\n".join(agent_lines) + "\n")
    # Another session's subagent in the same folder is not this session's.
    (folder / "agent-ffff0000.jsonl").write_text(
        agent.read_text().replace(SESSION_ID, "99999999-0000-4000-8000-000000000009"))
    return main, agent


def push_env(url: str, token: str, home: Path, **extra: str) -> dict:
    """Only the variables the script documents, a home of the test's own (the agents' folders,
    the spool), and a detached uploader that makes one pass and ends."""
    home.mkdir(parents=True, exist_ok=True)
    return {"CTXSIM_URL": url, "CTXSIM_TOKEN": token, "CTXSIM_TIMEOUT": "30",
            "PATH": "/usr/bin:/bin", "HOME": str(home), "CTXSIM_SPOOL": str(home / "spool"),
            "CTXSIM_LINGER_SECONDS": "0", **extra}


def run_push(args: list[str], *, url: str, token: str, stdin: str = "", home: Path | None = None,
             **extra: str):
    """The script as a hook runs it: its own process, and without site-packages (`-S`): it
    needs nothing but the standard library. A hook's detached uploader is waited for."""
    home = home or Path(tempfile.mkdtemp(prefix="ctxsim-home-"))
    env = push_env(url, token, home, **extra)
    done = subprocess.run([sys.executable, "-S", str(PUSH), *args], input=stdin, env=env,
                          capture_output=True, text=True, timeout=120)
    wait_for_uploader(home / "spool")
    return done


def wait_for_uploader(spool: Path, timeout: float = 90.0) -> None:
    """Until the detached uploader the last hook started has ended."""
    pid_file = spool / "uploader.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
        if ") Z " in stat:  # ended, not reaped yet
            break
        time.sleep(0.05)
    pid_file.unlink(missing_ok=True)



def test_the_claude_code_hook_uploads_the_transcript_and_its_subagent(
    personas, live_server, tmp_path
):
    _, token = create_token(personas.team, "hook", "ingest")
    main, agent = claude_session(tmp_path)
    hook_input = json.dumps({
        "session_id": SESSION_ID, "transcript_path": str(main), "cwd": str(tmp_path),
        "hook_event_name": "SessionEnd", "reason": "prompt_input_exit",
    })
    done = run_push(["--hook", "claude-code"], url=live_server.url, token=token, stdin=hook_input)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    received = {r.name: r for r in ReceivedFile.objects.all()}
    assert set(received) == {main.name, agent.name}, done.stderr
    assert received[main.name].session_key == SESSION_ID
    assert received[agent.name].session_key == f"{SESSION_ID}:{agent.stem}"
    assert all(r.sessions.filter(team=personas.team).exists() for r in received.values())
    # The session ends again after a resume: the transcript grew, and the newer one replaces it.
    out = StringIO()
    write_claude_code_jsonl(out, 6, 11)
    main.write_text(out.getvalue())
    again = run_push(["--hook", "claude-code"], url=live_server.url, token=token,
                     stdin=hook_input)
    assert again.returncode == 0
    newest = ReceivedFile.objects.filter(name=main.name).order_by("-pk").first()
    assert newest.outcome == ReceivedFile.Outcome.REPLACED
    assert Session.objects.filter(source_name=main.name).count() == 1


def test_the_codex_hook_uploads_the_rollout(personas, live_server, tmp_path):
    from tests.shared import shared_files

    rollouts = shared_files("transcripts/codex-rollout", "*.jsonl")
    if not rollouts:
        pytest.skip("shared Codex rollouts not found (set CTXSIM_SHARED_DIR)")
    _, token = create_token(personas.team, "codex", "ingest")
    hook_input = json.dumps({"session_id": "019a93b9", "transcript_path": str(rollouts[0]),
                             "hook_event_name": "Stop", "cwd": str(tmp_path)})
    done = run_push(["--hook", "codex"], url=live_server.url, token=token, stdin=hook_input)
    assert done.returncode == 0 and done.stdout == ""
    record = ReceivedFile.objects.get()
    assert record.session_key == "019a93b9" and record.sessions.get().format == "codex"


def test_a_hook_exits_0_when_the_server_is_down_or_the_input_is_bad(personas, tmp_path):
    main, _ = claude_session(tmp_path)
    down = f"http://127.0.0.1:{free_port()}"
    hook_input = json.dumps({"session_id": SESSION_ID, "transcript_path": str(main)})
    home = tmp_path / "home"
    done = run_push(["--hook", "claude-code"], url=down, token="ctx_x", stdin=hook_input,
                    home=home)
    assert done.returncode == 0 and done.stdout == ""
    assert "cannot reach" in (home / "spool" / "uploader.log").read_text()
    for bad in ("not json", "[]", "{}"):
        assert run_push(["--hook", "codex"], url=down, token="ctx_x", stdin=bad).returncode == 0
    unset = run_push(["--hook", "codex"], url="", token="", stdin=hook_input)
    assert unset.returncode == 0 and "CTXSIM_URL is not set" in unset.stderr


def test_ctxsim_push_exits_1_with_the_servers_message(personas, live_server, tmp_path):
    _, token = create_token(personas.team, "cli", "ingest")
    good, _ = claude_session(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [}')
    done = run_push([str(good), str(bad)], url=live_server.url, token=token)
    assert done.returncode == 1
    assert f"{good}: imported, 1 session(s) {live_server.url}/sessions/" in done.stdout
    assert f"{bad}: 400 " in done.stderr and "line 1" in done.stderr
    again = run_push([str(good)], url=live_server.url, token=token)
    assert again.returncode == 0 and "already imported" in again.stdout
    refused = run_push([str(good)], url=live_server.url, token="ctx_wrong")
    assert refused.returncode == 1 and ": 401 " in refused.stderr


def test_the_plugin_and_hook_files_point_at_the_script():
    contrib = ROOT / "contrib"
    plugin = json.loads((contrib / "claude-code" / ".claude-plugin" / "plugin.json").read_text())
    assert plugin["name"] == "ctxsim-capture"
    market = json.loads((contrib / ".claude-plugin" / "marketplace.json").read_text())
    assert [p["name"] for p in market["plugins"]] == ["ctxsim-capture"]
    assert (contrib / market["plugins"][0]["source"] / ".claude-plugin").is_dir()
    hooks = json.loads((contrib / "claude-code" / "hooks" / "hooks.json").read_text())
    (command,) = [h["command"] for group in hooks["hooks"]["SessionEnd"] for h in group["hooks"]]
    assert "${CLAUDE_PLUGIN_ROOT}/bin/ctxsim-push" in command and "--hook claude-code" in command
    assert (contrib / "claude-code" / "bin" / "ctxsim-push").is_file()
    codex = json.loads((contrib / "codex" / "hooks.json").read_text())
    (command,) = [h["command"] for group in codex["hooks"]["Stop"] for h in group["hooks"]]
    assert command.endswith("contrib/bin/ctxsim-push --hook codex")
    assert PUSH.resolve() == (contrib / "claude-code" / "bin" / "ctxsim-push").resolve()
