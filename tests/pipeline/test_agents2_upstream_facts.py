"""Facts from the agents' own unit tests (read with `fetch`, not copied): the same inputs give
the same answers in ctxsim's reproduction.

- Gemini CLI `chatCompressionService.test.ts` (google-gemini/gemini-cli@5411f113),
  `findCompressSplitPoint`: JSON lengths 66, 68, 66, 68, 65 split at 4 for fractions 0.5 and
  0.9; four contents ending on a model text at 0.8 → 4 (everything); ending on a function
  call at 0.99 → 2; one content → 0.
- Cline `ContextManager.test.ts` (cline/cline@9fd2b99be4), `getNextTruncationRange` over
  alternating user/assistant messages: 11 half → [2, 5], 11 quarter → [2, 7], 21 half →
  [2, 9] then [2, 13], 3 half → [2, 1].
- OpenHands software-agent-sdk `tests/sdk/utils/test_truncate.py` (@611629e6),
  `maybe_truncate`: 1,000 characters at limit 200 keep a head of ⌈87/2⌉ = 44 and a tail of 43
  around the 113-character notice (200 in all); at the limit, a zero limit or empty text
  nothing changes; a notice longer than the limit is cut to it.
"""

from __future__ import annotations

from ctxsim.pipeline.messages import Message, ToolCall
from ctxsim.pipeline.stages.cline_truncation import next_range
from ctxsim.pipeline.stages.gemini_compress import split_point
from ctxsim.pipeline.stages.openhands_v1_tool_output import NOTICE, maybe_truncate


def contents(*sizes: int, last_call: bool = False) -> list[Message]:
    out = [Message.of("user" if k % 2 == 0 else "assistant", "x" * n)
           for k, n in enumerate(sizes)]
    if last_call:
        out[-1] = Message.of("assistant", "", tool_calls=[ToolCall("f", "foo", "{}")])
    return out


def test_gemini_split_points() -> None:
    five = contents(66, 68, 66, 68, 65)
    assert split_point(five, 0.5) == 4
    assert split_point(five, 0.9) == 4
    assert split_point(contents(66, 68, 66, 68), 0.8) == 4
    assert split_point(contents(66, 68, 66, 68, last_call=True), 0.99) == 2
    assert split_point(contents(9), 0.5) == 0
    assert split_point([], 0.5) == 0


def test_cline_truncation_ranges() -> None:
    assert next_range(None, 11, "half") == 5
    assert next_range(None, 11, "quarter") == 7
    first = next_range(None, 21, "half")
    assert first == 9 and next_range(first, 21, "half") == 13
    assert next_range(None, 3, "half") == 1
    quarter = next_range(None, 41, "quarter")
    assert next_range(quarter, 41, "quarter") > quarter


def test_openhands_maybe_truncate() -> None:
    assert len(NOTICE) == 113
    out = maybe_truncate("A" * 1000, 200)
    assert out == "A" * 44 + NOTICE + "A" * 43 and len(out) == 200
    assert maybe_truncate("A" * 50, 50) == "A" * 50
    assert maybe_truncate("test", 0) == "test" and maybe_truncate("", 100) == ""
    assert maybe_truncate("A" * 100, 10) == NOTICE[:10]
