"""One run key for equal settings, and one way to build a replay."""

from __future__ import annotations

import pytest

from ctxsim.pipeline.messages import Message, Session
from ctxsim.pipeline.profiles import PROFILES, resolve
from ctxsim.pipeline.replay import replay
from ctxsim.pipeline.runkey import run_key
from ctxsim.pipeline.trace import build_trace


def _messages() -> list[Message]:
    return [Message.of("user", "hi"), Message.of("assistant", "done")]


def test_settings_that_resolve_alike_share_one_run_key() -> None:
    assert run_key(resolve("aivax")) == run_key(resolve(PROFILES["aivax"], {}))
    assert run_key(resolve("aivax", {"toolContextCount": 3})) == run_key(resolve("aivax"))
    assert run_key(resolve("aivax", {"toolContextCount": 4})) != run_key(resolve("aivax"))


def test_a_replay_from_a_resolved_config_matches_one_from_the_profile_name() -> None:
    by_name = build_trace(replay(_messages(), "chatcli", {"counter": "bytes4"}))
    resolved = build_trace(replay(_messages(), resolve("chatcli", {"counter": "bytes4"})))
    assert by_name == resolved


def test_a_whole_session_brings_its_tools_along() -> None:
    tools = [{"name": "read"}]
    session = Session(format="openai", title="", messages=tuple(_messages()), tools=tools)
    assert replay(session, "none").tools == tools


def test_a_resolved_config_takes_no_further_overrides() -> None:
    with pytest.raises(TypeError):
        replay(_messages(), resolve("chatcli"), {"ccr": "off"})
