"""The redaction patterns (SPEC §12), pure: each kind is found, ordinary text is left alone,
raw-byte and decoded-text passes agree, and JSON stays JSON."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ctxsim.importers import load
from ctxsim.importers.redact import KINDS, merge_counts, redact_bytes, redact_sessions, redact_text
from tests.factories import PLANTED_SECRETS
from tests.shared import SHARED_DIR, requires_shared

PLANTED = PLANTED_SECRETS


def test_every_kind_has_a_planted_example():
    assert set(PLANTED) == set(KINDS)


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_it_replaces_each_kind_and_counts_it(kind):
    secret, core = PLANTED[kind]
    text, counts = redact_text(f"before {secret} after")
    assert core not in text and f"[REDACTED:{kind}]" in text
    assert text.startswith("before ") and text.endswith(" after")
    assert counts == {kind: 1}


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_the_raw_json_pass_keeps_the_file_valid_json(kind):
    secret, core = PLANTED[kind]
    raw = json.dumps({"content": f"x {secret} y", "nested": json.dumps({"k": secret})}).encode()
    redacted, counts = redact_bytes(raw)
    assert core.encode() not in redacted
    assert counts[kind] >= 1
    json.loads(redacted)  # still valid: no replacement crossed a quote or an escape


def test_the_url_password_keeps_the_rest_of_the_url():
    text, _ = redact_text("DATABASE_URL=postgres://app:s3cr3t-pw@db:5432/x")
    assert text == "DATABASE_URL=postgres://app:[REDACTED:password-in-url]@db:5432/x"


def test_json_escaped_slashes_and_a_second_pass_change_nothing_more():
    raw = b'{"u": "mysql:\\/\\/root:hunter22@db\\/app"}'
    once, counts = redact_bytes(raw)
    assert b"hunter22" not in once and counts == {"password-in-url": 1}
    for text in (once.decode(), redact_text("Password=abc123;")[0]):
        assert redact_text(text) == (text, {})  # a marker is never taken for a secret


def test_ordinary_text_is_left_alone():
    text = ("see https://github.com/a/b, http://localhost:8000/x?a=1, user@example.com, "
            "git@github.com:owner/repo.git, sk-learn, task-ant-1, password reset flow, "
            "Authorization: see below, eyJ truncated, AKIA-not-a-key, the pwd command")
    assert redact_text(text) == (text, {})


def test_bytes_outside_the_matches_are_kept_exactly():
    raw = b"\xff\xfe cut \xe2\x82 AKIAQ7PLANTEDKEY0001 \x00end"
    redacted, counts = redact_bytes(raw)
    assert redacted == b"\xff\xfe cut \xe2\x82 [REDACTED:aws-access-key] \x00end"
    assert counts == {"aws-access-key": 1}


def test_sessions_are_redacted_everywhere_a_secret_can_hide():
    secret, core = PLANTED["github-token"]
    document = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": f"token {secret}"},
            {"role": "user", "content": f"use {secret}"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "run", "arguments": json.dumps({"cmd": f"echo {secret}"})}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": secret},
            {"role": "assistant", "content": "done"},
        ],
        "tools": [{"type": "function", "function": {"name": "run", "description": secret,
                                                     "parameters": {"type": "object"}}}],
    }
    import io

    parsed = load(io.BytesIO(json.dumps(document).encode()))
    sessions, counts = redact_sessions(parsed.sessions)
    # system, user, call arguments, result, tool description; the title repeats the user's
    # message and is redacted without being counted twice.
    assert counts == {"github-token": 5}
    assert core not in repr(sessions)


def test_a_title_cut_inside_a_secret_loses_the_secrets_first_characters():
    import io

    secret = PLANTED["aws-secret-key"][0]
    document = {"messages": [{"role": "user", "content": f"Fix the deploy. {secret} please"},
                             {"role": "assistant", "content": "ok"}]}
    (session,) = load(io.BytesIO(json.dumps(document).encode())).sessions
    cut = replace(session, title=f"Fix the deploy. {secret[:40]}…")
    (redacted,), counts = redact_sessions([cut])
    assert redacted.title == "Fix the deploy. aws_secret_access_key = [REDACTED:aws-secret-key]…"
    assert counts == {"aws-secret-key": 1}


def test_merge_counts_adds_by_kind_in_a_fixed_order():
    assert merge_counts({"jwt": 1}, None, {"jwt": 2, "private-key": 1}) == {
        "private-key": 1, "jwt": 3}
    assert list(merge_counts({"jwt": 1, "aws-access-key": 1})) == ["aws-access-key", "jwt"]


@requires_shared
def test_the_shared_real_transcripts_hold_nothing_the_patterns_match():
    """Precision on real data: MANIFEST says they were scanned and hold no credentials."""
    files = [p for p in (SHARED_DIR / "transcripts").rglob("*")
             if p.is_file() and p.suffix in (".jsonl", ".json", ".traj")]
    assert files
    found = {p.name: dict(redact_bytes(p.read_bytes())[1]) for p in files}
    assert {name: c for name, c in found.items() if c} == {}


# Issue 28 item 9: secrets the raw bytes of a JSON line hide behind escapes.
ESCAPED_SECRETS = (
    # A header after an escaped newline: no word boundary before "Authorization" in the bytes.
    (b'{"content": "curl -s \\\\\\nAuthorization: Bearer PlantedBearerToken0123456789"}',
     "PlantedBearerToken0123456789", "authorization-header"),
    (b'{"content": "key\\nAuthorization: Bearer PlantedBearerToken0123456789"}',
     "PlantedBearerToken0123456789", "authorization-header"),
    # An Anthropic key with its dashes written as \\u002d.
    (b'{"content": "export K=sk\\u002dant\\u002dapi03\\u002dPlantedAnthropicKey0123456789"}',
     "PlantedAnthropicKey0123456789", "anthropic-key"),
)


@pytest.mark.parametrize(("raw", "core", "kind"), ESCAPED_SECRETS)
def test_a_raw_json_line_is_redacted_behind_its_escapes(raw, core, kind):
    from ctxsim.importers.redact import redact_raw_line

    assert core in json.loads(raw)["content"]  # the fixture hides the secret as meant
    redacted, counts = redact_raw_line(raw)
    assert core.encode() not in redacted and core not in json.loads(redacted)["content"]
    assert counts[kind] == 1
    assert f"[REDACTED:{kind}]" in json.loads(redacted)["content"]


def test_a_raw_line_keeps_every_byte_outside_the_redacted_string():
    from ctxsim.importers.redact import redact_raw_line

    raw = (b'{"a": "caf\\u00e9 \\n", "b":  "x\\nAuthorization: Bearer '
           b'PlantedBearerToken0123456789",'
           b' "c": "\\ud83d\\ude00"}\n')
    redacted, _ = redact_raw_line(raw)
    assert redacted.startswith(b'{"a": "caf\\u00e9 \\n", "b":  "x\\nAuthorization: Bearer [RED')
    assert redacted.endswith(b'", "c": "\\ud83d\\ude00"}\n')
    # Not JSON at all: the byte pass alone, nothing lost.
    assert redact_raw_line(b"plain \\ text \\u12") == (b"plain \\ text \\u12", {})
