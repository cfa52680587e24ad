"""Issue 21's linearity measures (test_linear_work) on the part-2 agents' profiles: a call
reads the messages that are new or changed, not the whole history, and (where the agent's
view after a compaction stays small) copies what changed.

Gemini CLI and OpenCode keep a recent tail after a compaction, which each call sends as a
new view: their copies grow with that tail (measured, not asserted)."""

from __future__ import annotations

import pytest

from tests.pipeline.test_linear_work import (
    LINEAR,
    SIZES,
    copied_per_replay,
    role_reads_per_replay,
    sessions,  # noqa: F401 (the fixture)
)

PROFILES = ["gemini-cli", "openhands-v1", "cline", "roo-code", "aider", "opencode",
            "mini-swe-agent"]
SMALL_VIEWS = ["openhands-v1", "cline", "roo-code", "aider", "mini-swe-agent"]


@pytest.mark.parametrize("profile", PROFILES)
def test_a_call_reads_the_new_and_changed_messages(sessions, profile) -> None:  # noqa: F811
    small, large = (role_reads_per_replay(sessions[n], profile) for n in SIZES)
    assert large / small <= LINEAR, (small, large)


@pytest.mark.parametrize("profile", SMALL_VIEWS)
def test_a_call_copies_what_changed(sessions, profile) -> None:  # noqa: F811
    small, large = (copied_per_replay(sessions[n], profile) for n in SIZES)
    assert large / small <= LINEAR, (small, large)
