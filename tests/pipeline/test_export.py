"""Export then import gives back every value the format carries; imports fail per field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxsim.pipeline.export import (
    export_aivax,
    export_anthropic,
    export_chatcli,
    export_profile,
    import_aivax,
    import_anthropic,
    import_chatcli,
)
from ctxsim.pipeline.params import CHATCLI_ENV, ParamError
from ctxsim.pipeline.profiles import resolve

env_values = st.dictionaries(st.sampled_from([v.name for v in CHATCLI_ENV]),
                             st.text(alphabet=' 0123456789+-_"\\=#ab', max_size=8))


@given(env_values, st.sampled_from(["on", "off"]))
def test_chatcli_env_round_trips_typed_strings_verbatim(env, ccr) -> None:
    values = resolve("chatcli", {"env": env, "ccr": ccr}).values
    back = import_chatcli(export_chatcli(values).content)
    assert back.get("env", {}) == env
    assert back.get("ccr", "on") == ccr


def test_ccr_off_becomes_compression_off() -> None:
    text = export_chatcli(resolve("chatcli", {"ccr": "off"}).values).content
    assert text == "CHATCLI_COMPRESSION=off\n"


def test_chatcli_export_lists_what_it_left_out() -> None:
    cfg = resolve("chatcli-docs", {"loop_mode": "coder", "anchor_text": "REMINDER"})
    left = export_profile(cfg)[0].left_out
    assert any(x.startswith("loop_mode") for x in left)
    assert any(x.startswith("semantics") for x in left)
    assert any("stage list" in x for x in left)


def test_an_unknown_env_variable_is_rejected_with_its_line() -> None:
    with pytest.raises(ParamError) as exc:
        import_chatcli("# comment\nCHATCLI_NOPE=1\nbroken\n")
    assert set(exc.value.errors) == {"line 2: CHATCLI_NOPE", "line 3: broken"}


@given(st.one_of(st.none(), st.integers(0, 10**6)),
       st.sampled_from(["Throw", "Truncate", "TruncateHard"]), st.integers(0, 50))
def test_aivax_fragment_round_trips(limit, action, count) -> None:
    config = {"contextMaximumSize": limit, "contextOverflowAction": action,
              "toolContextCount": count}
    values = resolve("aivax", config).values
    assert import_aivax(export_aivax(values).content) == config


def test_aivax_import_rejects_unknown_keys_and_bad_values_per_field() -> None:
    with pytest.raises(ParamError) as exc:
        import_aivax({"contextMaximumSize": "big", "toolContextCount": -2, "model": "x"})
    assert set(exc.value.errors) == {"contextMaximumSize", "toolContextCount", "model"}


anthropic_configs = st.fixed_dictionaries({
    "trigger": st.builds(lambda t, v: {"type": t, "value": v},
                         st.sampled_from(["input_tokens", "tool_uses"]), st.integers(0, 10**6)),
    "keep": st.builds(lambda v: {"type": "tool_uses", "value": v}, st.integers(0, 20)),
    "clear_at_least": st.one_of(st.none(), st.builds(
        lambda v: {"type": "input_tokens", "value": v}, st.integers(0, 10**5))),
    "exclude_tools": st.lists(st.text(min_size=1, max_size=5), max_size=3),
    "clear_tool_inputs": st.one_of(st.booleans(),
                                   st.lists(st.text(min_size=1, max_size=5), max_size=2)),
})


@given(anthropic_configs)
def test_anthropic_context_management_round_trips(config) -> None:
    values = resolve("anthropic-clear-tool-uses", config).values
    back = import_anthropic(export_anthropic(values).content)
    for key, value in config.items():
        got = back[key]
        assert (list(got) if isinstance(got, tuple) else got) == value


def test_anthropic_import_names_the_bad_field() -> None:
    with pytest.raises(ParamError) as exc:
        import_anthropic({"edits": [{"type": "clear_tool_uses_20250919", "keep": 3,
                                     "foo": 1}]})
    assert set(exc.value.errors) == {"edits[0].keep", "edits[0].foo"}


def test_a_stacked_profile_exports_one_artefact_per_tool() -> None:
    assert [e.tool for e in export_profile(resolve("chatcli-aivax"))] == ["chatcli", "aivax"]
    assert export_profile(resolve("none")) == []


def test_a_chatcli_env_file_is_read_as_dotenv_reads_it() -> None:
    text = ('export CHATCLI_TOOL_RESULT_MAX_CHARS="12 000"  # quoted, with a comment\n'
            "CHATCLI_MICROCOMPACT_HEAD_CHARS='a\\b'\n"
            "CHATCLI_COMPRESSION=off # trailing comment\n")
    assert import_chatcli(text) == {
        "env": {"CHATCLI_TOOL_RESULT_MAX_CHARS": "12 000",
                "CHATCLI_MICROCOMPACT_HEAD_CHARS": "a\\b"},
        "ccr": "off",
    }
    with pytest.raises(ParamError) as exc:
        import_chatcli('CHATCLI_TOOL_RESULT_MAX_CHARS="5000\n')
    assert list(exc.value.errors) == ['line 1: CHATCLI_TOOL_RESULT_MAX_CHARS="5000']
