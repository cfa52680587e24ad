"""What several test modules build: personas' names and passwords, sessions and upload files.

Test modules import their shared helpers from here (or get fixtures from a `conftest.py`),
never from another test module. Django is imported inside the helpers that need it, so the
pure tiers (`tests/pipeline`, `tests/importers`, `tests/insights`) can use this module too.
"""

from __future__ import annotations

import io
import json

from ctxsim.generator import write_claude_code_jsonl
from ctxsim.pipeline.messages import Message, Session, ToolCall

# -- personas (the fixture itself is in tests/conftest.py) ---------------------------------------

PERSONAS = ("owner", "reviewer", "viewer", "outsider", "anonymous")


def password_for(name: str) -> str:
    return f"{name}-pass-123"


def use_fast_password_hashing(settings) -> None:
    """Personas are created in nearly every web test; the default hasher costs ~0.5 s each."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# -- sessions -------------------------------------------------------------------------------------

SPILLED_LINES = [f"line {n:04d} of a failing build log " + "x" * 40 for n in range(1, 401)]
SPILLED = "\n".join(SPILLED_LINES)  # ~25 KB: an error result, never capped, always spilled


def spilling_session() -> Session:
    """Five messages whose one tool result (an error) the chatcli profile spills to a file."""
    return Session(
        format="openai-chat",
        title="Build failure",
        messages=(
            Message.of("system", "You are a build agent."),
            Message.of("user", "Why does the build fail?"),
            Message.of("assistant", "", tool_calls=[ToolCall("call_1", "run_build", "{}")]),
            Message.of("tool", SPILLED, tool_call_id="call_1", is_error=True),
            Message.of("assistant", "The linker fails on line 17."),
        ),
    )


# Transcript text that would run as markup if it were ever rendered as HTML.
UNTRUSTED = [
    "<script>alert('pwned')</script>",
    '<img src=x onerror="alert(1)">',
    '<a href="javascript:alert(2)">click</a>',
    "&lt;already escaped&gt; &amp; entities",
]

APP_SOURCE = "\n".join(f"def handler_{n}(request):\n    return render(request, {n})"
                       for n in range(60))


def read(call_id: str, path: str) -> ToolCall:
    return ToolCall(call_id, "Read", json.dumps({"file_path": path}))


def rereading_transcript() -> list[Message]:
    """An agent reads app.py, then urls.py, then app.py again (once the first is cleared)."""
    return [
        Message.of("system", "You are a coding agent."),
        Message.of("user", "Fix the crash in app.py"),
        Message.of("assistant", "", tool_calls=[read("c1", "/repo/src/app.py")]),
        Message.of("tool", APP_SOURCE, tool_call_id="c1"),
        Message.of("assistant", "", tool_calls=[read("c2", "/repo/src/urls.py")]),
        Message.of("tool", "urlpatterns = []", tool_call_id="c2"),
        # The first result is cleared by now, so the agent reads the same file again.
        Message.of("assistant", "", tool_calls=[read("c3", "/repo/src/app.py")]),
        Message.of("tool", APP_SOURCE, tool_call_id="c3"),
        Message.of("assistant", "Fixed."),
    ]


def lost_path_transcript(user_mentions_it: bool = False) -> list[Message]:
    """A path only a build log mentions, named again in the final answer."""
    build_log = ("make: *** [all] Error 2\nerror: undefined symbol in "
                 "build/generated/schema_v2.go line 4\n" + "cc -c ok\n" * 40)
    question = "Why does the build fail?" + (
        " Maybe build/generated/schema_v2.go?" if user_mentions_it else "")
    return [
        Message.of("system", "You are a build agent."),
        Message.of("user", question),
        Message.of("assistant", "", tool_calls=[ToolCall("b1", "Bash", '{"command": "make"}')]),
        Message.of("tool", build_log, tool_call_id="b1"),
        Message.of("assistant", "", tool_calls=[ToolCall("b2", "Bash", '{"command": "ls"}')]),
        Message.of("tool", "Makefile\nREADME", tool_call_id="b2"),
        Message.of("assistant", "The failure is in build/generated/schema_v2.go; regenerate it."),
    ]


# -- uploads --------------------------------------------------------------------------------------


def claude_code_bytes(calls: int = 6, seed: int = 1, **options) -> bytes:
    out = io.StringIO()
    write_claude_code_jsonl(out, calls, seed, **options)
    return out.getvalue().encode()


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def row_counts() -> dict[str, int]:
    from ctxsim.transcripts.models import Content, ImportJob, Message, Session

    return {
        model.__name__: model.objects.count() for model in (Session, Message, Content, ImportJob)
    }
