"""A replay a web process lets go is freed by reference counting (issue 31).

Its call views and their memo make no cycle with it (the view holds the memo weakly, the
replay's cost functions are its cost cache's), so giving its memory back needs no full
collection: under load a worker held a million objects and each full collection paused all
its requests for half a second.
"""

from __future__ import annotations

import gc
import weakref

from ctxsim.replays import services
from ctxsim.replays.cache import REPLAYS, ReplayKey
from ctxsim.replays.state import ReplaySettings


def _replay_of(session, settings):
    key = ReplayKey.of(session, settings.key)
    kept = REPLAYS.kept.get(key)
    return kept[1] if kept is not None else REPLAYS.live.get(key).replay


def test_a_dropped_replay_and_its_call_views_go_without_the_cycle_collector(personas,
                                                                             long_session):
    settings = ReplaySettings()
    run = services.summary_for(long_session, settings)
    services.call_detail(long_session, settings, run, 5)
    detail = services.call_detail(long_session, settings, run, 6)  # a step: the memo's last view
    shown = [row.message.content for row in detail.view.rows]
    refs = [weakref.ref(o) for o in (_replay_of(long_session, settings), detail.memo,
                                     detail.view)]
    # Cycles made before the drop are not the drop's: an exception a database query raised
    # and caught inside itself keeps its frames, and through them the replay that ran it,
    # until a collection.
    gc.collect()
    gc.disable()
    try:
        REPLAYS.forget_replays()
        # Whoever still reads the view holds its memo: what it reads first after the drop
        # (the rows' tools, from the memo) is what a new replay shows.
        tools = detail.view.tool_names()
        assert [row.message.content for row in detail.view.rows] == shown
        del detail
        assert [r() for r in refs] == [None, None, None]
    finally:
        gc.enable()
    again = services.call_detail(long_session, settings, run, 6)
    assert again.view.tool_names() == tools and any(tools)
    assert [row.message.content for row in again.view.rows] == shown
