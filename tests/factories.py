"""What several test modules build: personas' names and passwords, sessions and upload files.

Test modules import their shared helpers from here (or get fixtures from a `conftest.py`),
never from another test module. Django is imported inside the helpers that need it, so the
pure tiers (`tests/pipeline`, `tests/importers`, `tests/insights`) can use this module too.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

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


def first_spill(session, call: int | None = None):
    """The first spill (a `spills.SpillRef`) of the session's stored replays, optionally one
    written at `call`; None when there is none."""
    from ctxsim.replays.models import ReplayRun
    from ctxsim.replays.spills import spills_of

    for run in ReplayRun.objects.filter(session=session).order_by("pk"):
        for spill in spills_of(run):
            if call is None or spill.created_in_call == call:
                return spill
    return None


def spill_args(session, spill) -> list:
    """The URL arguments of a spill's viewer (session id, run key, position)."""
    return [getattr(session, "pk", session), spill.run_key, spill.seq]


# -- the REST API (SPEC §12) ---------------------------------------------------------------------


def bearer(token: str | None) -> dict:
    """Django test client keyword arguments for `Authorization: Bearer <token>`."""
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}


def url_patterns(patterns=None, prefix: str = "", namespace: str | None = None):
    """(namespace, name, route, parameter names) of every URL, includes walked recursively."""
    from django.urls import URLPattern, URLResolver, get_resolver

    for p in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(p, URLResolver):
            yield from url_patterns(p.url_patterns, prefix + str(p.pattern),
                                    p.namespace or namespace)
        elif isinstance(p, URLPattern):
            yield namespace, p.name, prefix + str(p.pattern), list(p.pattern.converters)


# One planted secret per redaction kind, and the part of it that must disappear.
PLANTED_SECRETS = {
    "private-key": ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u"
                    "ZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQyNTUxOQ\n-----END OPENSSH PRIVATE KEY-----",
                    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9u"),
    "aws-access-key": ("AKIAQ7PLANTEDKEY0001", "AKIAQ7PLANTEDKEY0001"),
    "aws-secret-key": ("aws_secret_access_key = Zp1antedSecretKeyZp1antedSecretKeyZp1ant",
                       "Zp1antedSecretKeyZp1antedSecretKeyZp1an"),
    "github-token": ("ghp_PlantedGithubToken0123456789abcdefABCD", "PlantedGithubToken0123"),
    "gitlab-token": ("glpat-PlantedGitlab0123456789", "PlantedGitlab0123456789"),
    "slack-token": ("xoxb-1111111111-PlantedSlackToken", "PlantedSlackToken"),
    "stripe-key": ("sk_live_PlantedStripeKey0123456789", "PlantedStripeKey0123456789"),
    "anthropic-key": ("sk-ant-api03-PlantedAnthropicKey0123456789-abcdefXYZ",
                      "PlantedAnthropicKey0123456789"),
    "openai-key": ("sk-proj-PlantedOpenaiKey0123456789abcdefghij", "PlantedOpenaiKey0123456789"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkand0In0.PlantedJwtSignature0123456789",
            "PlantedJwtSignature0123456789"),
    "password-in-url": ("postgres://app:PlantedUrlPassw0rd@db.internal:5432/prod",
                        "PlantedUrlPassw0rd"),
    "connection-string-password": ("Server=db;User Id=app;Password=PlantedConnPassw0rd;",
                                   "PlantedConnPassw0rd"),
    "authorization-header": ("Authorization: Bearer PlantedBearerToken0123456789",
                             "PlantedBearerToken0123456789"),
}

# Claude Code's request bodies, hand-made (see the folder's README: no public sample exists).
REQUEST_BODIES = (
    Path(__file__).parent / "importers" / "fixtures" / "claude-code-requests" / "provider-bodies"
)
REQUEST_BODIES_SESSION = "7f3c2a10-5b4e-4c8d-9a61-0e2f4b6d8c11"


def request_body_files(prefix: str = "provider-bodies/", skip: tuple[str, ...] = ()) -> dict:
    """The request-body folder's files by archive path, to pack as a user would upload them."""
    return {prefix + p.name: p.read_bytes() for p in sorted(REQUEST_BODIES.iterdir())
            if p.name not in skip}


def body_of(response) -> bytes:
    """A response's bytes, whether it was streamed (the trace download) or not."""
    return b"".join(response.streaming_content) if response.streaming else response.content


def heartbeat_moves(model, pk: int, seconds: float = 60) -> bool:
    """Whether the `heartbeat_at` of row `pk` of `model` (an import job, a sweep) changes
    within `seconds`, polled every 0.1 s: for a patched step that reports nothing itself."""
    import threading

    first = model.objects.get(pk=pk).heartbeat_at
    for _ in range(int(seconds * 10)):
        if model.objects.get(pk=pk).heartbeat_at != first:
            return True
        threading.Event().wait(0.1)
    return False
