"""Replay settings travel in the URL and back unchanged; the process cache stays bounded."""

from __future__ import annotations

from django.http import QueryDict

from ctxsim.pipeline.params import PARAMS
from ctxsim.replays.cache import LRU
from ctxsim.replays.codecs import form_value
from ctxsim.replays.state import ReplaySettings, settings_from_query


def test_every_kind_of_value_survives_a_trip_through_the_url() -> None:
    query = QueryDict(
        "profile=anthropic-clear-tool-uses&trigger.type=tool_uses&trigger.value=5"
        "&clear_at_least.type=none&clear_tool_inputs=Read,Grep&exclude_tools=Bash"
        "&placeholder=gone&counter=bytes4"
    )
    settings, errors = settings_from_query(query, team=None)
    assert errors == {}
    again, errors = settings_from_query(QueryDict(settings.query()), team=None)
    assert errors == {}
    assert again.config == settings.config
    assert again.query() == settings.query()
    assert settings.config["clear_tool_inputs"] == ["Read", "Grep"]


def test_env_and_map_values_come_back_in_name_order() -> None:
    # The env form's marker (env.present) is not part of the value, so it is not written
    # back beside variables; alone it means "no variable set".
    query = QueryDict("profile=chatcli&tool_caps=Read=@read&env.present=1"
                      "&env.CHATCLI_TOOL_RESULT_MAX_CHARS=9000&call=3")
    settings, _ = settings_from_query(query, team=None)
    assert settings.query(3) == (
        "profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=9000"
        "&tool_caps=Read%3D%40read&call=3"
    )


def test_settings_are_resolved_once() -> None:
    settings = ReplaySettings()
    assert settings.run_config() is settings.run_config()
    assert settings.key == settings.key and settings.counter == "cl100k_base"


def test_a_bool_or_list_value_reads_as_the_form_shows_it() -> None:
    spec = PARAMS["clear_tool_inputs"]
    assert form_value(spec, True) == "true"
    assert form_value(spec, False) == "false"
    assert form_value(spec, ("Read", "Grep")) == "Read, Grep"


def test_a_size_bounded_map_drops_its_oldest_entries_but_keeps_the_newest() -> None:
    lru: LRU[bytes] = LRU(10, len)
    lru.put("a", b"12345")
    lru.put("b", b"12345")
    assert lru.get("a") == b"12345"  # now the most recently used
    lru.put("c", b"1")
    assert lru.get("b") is None and lru.get("a") is not None
    lru.put("big", b"x" * 50)
    assert [k for k, _ in lru.items()] == ["big"]
