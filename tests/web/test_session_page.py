"""The session page and everything hanging off it: partials, errors, spills, traces, profiles."""

from __future__ import annotations

import json

import pytest
from django.http import QueryDict
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.replays.models import ReplayRun, SavedProfile
from ctxsim.transcripts.store import save_sessions
from tests.factories import (
    SPILLED,
    SPILLED_LINES,
    UNTRUSTED,
    first_spill,
    spill_args,
    spilling_session,
)

pytestmark = pytest.mark.django_db

def page_url(row, query: str = "") -> str:
    return reverse("session-detail", args=[row.pk]) + (f"?{query}" if query else "")


def htmx(target: str) -> dict:
    return {"HX-Request": "true", "HX-Target": f"div#{target}"}


def test_the_full_page_and_each_partial_render_for_the_same_state(personas, long_session):
    client = personas.client("viewer")
    query = "profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=5000&call=7"
    full = client.get(page_url(long_session, query))
    assert full.status_code == 200
    html = full.content.decode()
    assert 'id="replay"' in html and 'id="call-view"' in html and "<html" in html
    assert 'data-call="7"' in html

    replay = client.get(page_url(long_session, query), headers=htmx("replay"))
    assert replay.status_code == 200
    part = replay.content.decode()
    assert part.lstrip().startswith('<section id="replay"') and "<html" not in part
    assert 'data-call="7"' in part
    assert replay["HX-Push-Url"].endswith("call=7")
    assert "CHATCLI_TOOL_RESULT_MAX_CHARS=5000" in replay["HX-Push-Url"]

    call = client.get(page_url(long_session, query), headers=htmx("call-view"))
    assert call.status_code == 200
    assert call.content.decode().lstrip().startswith('<div id="call-view"')


def test_a_threshold_change_changes_the_numbers(personas, long_session):
    client = personas.client("owner")
    default = client.get(page_url(long_session, "profile=chatcli"), headers=htmx("replay"))
    tight = client.get(
        page_url(long_session, "profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=3000"),
        headers=htmx("replay"),
    )
    spills = lambda r: int(  # noqa: E731
        r.content.decode().split("<small>Spills</small><strong>")[1].split("<")[0]
    )
    assert spills(tight) > spills(default)
    assert ReplayRun.objects.filter(session=long_session).count() == 2


def test_reopening_the_same_settings_uses_the_replay_cache(personas, long_session):
    client = personas.client("owner")
    client.get(page_url(long_session, "profile=aivax"))
    client.get(page_url(long_session, "profile=aivax&call=3"))
    assert ReplayRun.objects.filter(session=long_session, profile="aivax").count() == 1


def test_invalid_values_give_a_200_partial_with_the_field_messages(personas, long_session):
    client = personas.client("owner")
    bad = "profile=aivax&contextMaximumSize=lots&toolContextCount=-3"
    response = client.get(page_url(long_session, bad), headers=htmx("replay"))
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#form-errors"
    body = response.content.decode()
    assert "contextMaximumSize" in body and "not a whole number" in body
    assert "toolContextCount" in body
    assert 'id="replay"' not in body  # the last good result stays on screen


def test_invalid_values_without_javascript_show_the_page_with_messages(personas, long_session):
    response = personas.client("owner").get(page_url(long_session, "profile=nope"))
    assert response.status_code == 200
    assert "unknown profile" in response.content.decode()


def test_a_submitted_form_lands_on_the_canonical_shareable_url(personas, long_session):
    query = ("profile=aivax&counter=cl100k_base&toolContextCount=5&contextMaximumSize=32000"
             "&contextOverflowAction=Truncate&submit=1&call=2")
    response = personas.client("owner").get(page_url(long_session, query))
    assert response.status_code == 302
    assert response["Location"].endswith("?profile=aivax&toolContextCount=5&call=2")


def test_chatcli_env_values_are_free_strings_with_their_effective_value(personas, long_session):
    query = "profile=chatcli&env.CHATCLI_TOOL_RESULT_MAX_CHARS=%201_000"
    body = personas.client("owner").get(page_url(long_session, query)).content.decode()
    assert "effective 20000" in body
    assert "is ignored by ChatCLI" in body


def test_every_endpoint_is_a_404_for_an_outsider(personas, stored):
    client = personas.client("outsider")
    personas.client("owner").get(page_url(stored))
    spill = first_spill(stored)
    urls = [
        page_url(stored),
        reverse("session-message", args=[stored.pk]) + "?call=1&row=0",
        reverse("session-trace", args=[stored.pk]),
        reverse("session-compare", args=[stored.pk]),
        reverse("profile-export", args=[stored.pk]),
        reverse("spill-view", args=spill_args(stored, spill)),
        reverse("spill-download", args=spill_args(stored, spill)),
    ]
    for url in urls:
        assert client.get(url).status_code == 404, url
    for name in ("profile-save", "profile-import"):
        assert client.post(reverse(name, args=[stored.pk]), {"name": "x"}).status_code == 404


def test_a_spill_of_one_session_is_not_reachable_through_another(personas, stored):
    personas.client("owner").get(page_url(stored))
    spill = first_spill(stored)
    other = save_sessions([spilling_session()], team=personas.other_team)[0]
    url = reverse("spill-view", args=spill_args(other, spill))
    assert personas.client("outsider").get(url).status_code == 404


def test_the_spill_viewer_shows_the_exact_content_and_line_ranges(personas, stored):
    client = personas.client("viewer")
    page = client.get(page_url(stored, "profile=chatcli&call=1")).content.decode()
    spill = first_spill(stored, call=1)
    assert reverse("spill-view", args=spill_args(stored, spill)) in page
    assert spill.path == "/tmp/chatcli-tool-results/budget_call_1_1.txt"

    download = client.get(reverse("spill-download", args=spill_args(stored, spill)))
    assert download.content == SPILLED.encode()

    ranged = client.get(reverse("spill-view", args=spill_args(stored, spill)) + "?start=10&end=12")
    body = ranged.content.decode()
    assert SPILLED_LINES[9] in body and SPILLED_LINES[11] in body
    assert SPILLED_LINES[8] not in body and SPILLED_LINES[12] not in body
    assert 'id="L10"' in body

    bad = client.get(reverse("spill-view", args=spill_args(stored, spill)) + "?start=0&end=x")
    assert bad.status_code == 200
    assert "start must be a line number" in bad.content.decode()


def test_the_trace_download_is_the_simulate_trace(personas, stored):
    response = personas.client("viewer").get(reverse("session-trace", args=[stored.pk]))
    trace = json.loads(b"".join(response.streaming_content))
    assert response["Content-Disposition"].startswith("attachment;")
    assert len(trace["calls"]) == 2
    assert trace["calls"][1]["budget"]["spilled_files"] == ["budget_call_1_1.txt"]
    assert trace["spilled_files"][0]["content"] == SPILLED




def test_transcript_content_is_rendered_as_text(personas):
    messages = [Message.of("user", text) for text in UNTRUSTED] + [
        Message.of(
            "assistant", "", tool_calls=[ToolCall("c<b>1", "<script>x</script>", '{"a":"<i>"}')]
        ),
        Message.of("tool", UNTRUSTED[0], tool_call_id="c<b>1"),
    ]
    row = save_sessions(
        [Session(format="openai-chat", title="<script>alert('title')</script>",
                 messages=tuple(messages))],
        team=personas.team,
    )[0]
    body = personas.client("owner").get(page_url(row, "profile=none&call=1")).content.decode()
    assert "<script>alert" not in body
    assert "<img src=x" not in body
    assert 'href="javascript:' not in body
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in body
    assert "&amp;lt;already escaped&amp;gt; &amp;amp; entities" in body


def test_a_reviewer_saves_the_current_settings_as_a_team_profile(personas, long_session):
    client = personas.client("reviewer")
    response = client.post(reverse("profile-save", args=[long_session.pk]), {
        "profile": "chatcli", "env.CHATCLI_TOOL_RESULT_MAX_CHARS": "8000", "name": "tight",
    })
    saved = SavedProfile.objects.get(team=personas.team, name="tight")
    assert response.status_code == 302
    assert response["Location"].endswith(f"?profile=saved%3A{saved.pk}")
    assert saved.params["env"] == {"CHATCLI_TOOL_RESULT_MAX_CHARS": "8000"}
    page = client.get(page_url(long_session, f"profile=saved:{saved.pk}")).content.decode()
    assert "tight (team)" in page
    assert 'value="8000"' in page


def test_saving_a_profile_under_a_taken_name_shows_a_message(personas, long_session):
    client = personas.client("reviewer")
    url = reverse("profile-save", args=[long_session.pk])
    client.post(url, {"profile": "chatcli", "name": "mine"})
    again = client.post(url, {"profile": "chatcli", "name": "mine"}, headers={"HX-Request": "true"})
    assert again.status_code == 400
    assert "already has a profile" in again.content.decode()
    assert SavedProfile.objects.filter(name="mine").count() == 1


def test_a_viewer_cannot_save_or_import_profiles(personas, long_session):
    client = personas.client("viewer")
    for name in ("profile-save", "profile-import"):
        response = client.post(reverse(name, args=[long_session.pk]), {"name": "x"})
        assert response.status_code == 403
    assert not SavedProfile.objects.exists()


def test_importing_a_pasted_config_creates_a_profile_and_bad_values_say_which(personas,
                                                                              long_session):
    client = personas.client("owner")
    url = reverse("profile-import", args=[long_session.pk])
    good = client.post(url, {"format": "aivax", "name": "gateway", "text": json.dumps(
        {"contextMaximumSize": 9000, "contextOverflowAction": "TruncateHard",
         "toolContextCount": 2})})
    assert good.status_code == 302
    saved = SavedProfile.objects.get(name="gateway")
    assert saved.params["contextMaximumSize"] == 9000
    bad = client.post(url, {"format": "aivax", "name": "broken",
                            "text": '{"contextMaximumSize": "big", "colour": 1}'})
    assert bad.status_code == 400
    body = bad.content.decode()
    assert "contextMaximumSize" in body and "colour" in body
    assert not SavedProfile.objects.filter(name="broken").exists()


def test_export_lists_one_artefact_per_tool_with_what_it_left_out(personas, long_session):
    client = personas.client("viewer")
    url = reverse("profile-export", args=[long_session.pk]) + "?profile=chatcli-aivax"
    body = client.get(url).content.decode()
    assert 'id="export-chatcli"' in body and 'id="export-aivax"' in body
    download = client.get(url + "&download=aivax")
    assert json.loads(download.content)["contextMaximumSize"] == 32000


def test_compare_shows_both_profiles_side_by_side(personas, long_session):
    client = personas.client("viewer")
    url = reverse("session-compare", args=[long_session.pk]) + "?a=chatcli&b=aivax&call=5"
    body = client.get(url).content.decode()
    assert "compare-chart" in body and "Call 5" in body
    data = json.loads(body.split('id="compare-data" type="application/json">')[1].split("<")[0])
    assert [s["label"] for s in data["series"]] == ["chatcli", "aivax"]
    partial = client.get(url, headers=htmx("compare-calls"))
    assert partial.content.decode().lstrip().startswith('<div id="compare-calls"')


def test_token_counts_are_persisted_with_the_contents_and_prime_a_fresh_counter(
    personas, long_session
):
    from ctxsim.pipeline.tokens import TiktokenCounter
    from ctxsim.replays.token_counts import load_counts
    from ctxsim.transcripts.models import Content
    from ctxsim.transcripts.store import load_session

    personas.client("viewer").get(page_url(long_session, "profile=chatcli"))
    canonical = load_session(long_session)
    stored = {c.sha256: c.token_counts for c in Content.objects.all()}
    assert stored and all("cl100k_base" in counts for counts in stored.values())

    fresh = TiktokenCounter("cl100k_base")
    load_counts(long_session, canonical, fresh)
    big = max(canonical.messages, key=lambda m: len(m.content))
    known = fresh.cached(big.content)
    assert known is not None and known == TiktokenCounter("cl100k_base").count(big.content)


def test_an_owner_deletes_a_session_and_its_orphaned_contents_and_spills(
    personas, stored, django_capture_on_commit_callbacks
):
    from django.core.files.storage import default_storage

    from ctxsim.transcripts.models import Content, Session

    personas.client("owner").get(page_url(stored, "profile=chatcli&call=1"))
    spill = first_spill(stored, call=1)
    assert default_storage.exists(spill.storage_name)
    shared = save_sessions([spilling_session()], team=personas.team)[0]  # same contents
    with django_capture_on_commit_callbacks(execute=True):
        response = personas.client("owner").post(reverse("session-delete", args=[stored.pk]))
    assert response.status_code == 302
    assert not Session.objects.filter(pk=stored.pk).exists()
    # The other session still holds the same contents, so they stay.
    assert Content.objects.count() == shared.message_count
    assert not default_storage.exists(spill.storage_name)


def test_reviewers_cannot_delete_sessions(personas, stored):
    from ctxsim.transcripts.models import Session

    response = personas.client("reviewer").post(reverse("session-delete", args=[stored.pk]))
    assert response.status_code == 403
    assert Session.objects.filter(pk=stored.pk).exists()


def test_a_spill_lost_from_storage_is_a_404_not_an_error(personas, stored):
    from django.core.files.storage import default_storage

    personas.client("owner").get(page_url(stored, "profile=chatcli&call=1"))
    spill = first_spill(stored, call=1)
    default_storage.delete(spill.storage_name)
    response = personas.client("owner").get(reverse("spill-view", args=spill_args(stored, spill)))
    assert response.status_code == 404


def test_token_counts_of_what_a_replay_made_are_shared_with_other_processes(
    personas, stored, monkeypatch
):
    from django.core.cache import cache

    from ctxsim.pipeline import tokens
    from ctxsim.replays import services
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.models import DerivedTokenCount

    # This process starts fresh (other tests may have counted the same contents already).
    with REPLAYS.another_process():
        personas.client("owner").get(page_url(stored, "profile=chatcli&call=1"))
        assert DerivedTokenCount.objects.filter(session=stored).exists()

        # Another process: a fresh counter, nothing loaded, nothing rendered.
        with REPLAYS.another_process():
            cache.clear()
            counter = tokens.get_counter("cl100k_base")

            class Refuse:
                def encode_ordinary(self, text):
                    raise AssertionError(f"tokenized again: {text[:60]!r}")

            monkeypatch.setattr(counter, "_encoding", Refuse())
            run = services.summary_for(stored, services.ReplaySettings())
            detail = services.call_detail(stored, services.ReplaySettings(), run, 1)
            assert detail.view.counts["spilled"] == 1


def test_a_result_rewritten_at_an_earlier_call_shows_what_is_sent_and_its_diff_on_demand(
    personas, long_session
):
    import re

    client = personas.client("viewer")
    html = client.get(page_url(long_session, "profile=chatcli&call=20"),
                      headers=htmx("call-view")).content.decode()
    # Microcompact stubs made at earlier calls are carried: no inline diff, a link to it.
    carried = re.findall(r'<p class="carried muted">.*?href="([^"]+)"', html)
    assert carried
    # What changed at this call itself (the budget's spills) keeps its inline diff.
    assert '<div class="diff">' in html
    url = carried[0].replace("&amp;", "&")
    row = re.search(r"row=(\d+)", url).group(1)
    diff = client.get(url).content.decode()
    assert diff.startswith(f'<div class="diff" id="body-20-{row}">')
    assert "<del" in diff and "<ins>" in diff
    # What the diff adds is in the message as sent (its whole body, "show all").
    added = re.search(r"<ins>(.*?)</ins>", diff, re.S).group(1)
    sent = client.get(url.replace("&diff=1", "")).content.decode()
    assert added and added in sent


def test_a_replay_takes_the_counts_another_process_stored_after_this_one_loaded_the_session(
    personas, long_session, monkeypatch
):
    from django.core.cache import cache

    from ctxsim.pipeline import tokens
    from ctxsim.replays import services
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.state import settings_from_query

    # Other preview sizes: contents no replay of this process has counted.
    tight = settings_from_query(
        QueryDict("profile=chatcli&env.CHATCLI_MICROCOMPACT_HEAD_CHARS=1234"), personas.team)[0]
    with REPLAYS.another_process():  # this process, fresh
        services.summary_for(long_session, services.ReplaySettings())  # this process loads it

        # Another process replays with a tighter limit and stores what it tokenized.
        with REPLAYS.another_process():
            run = services.summary_for(long_session, tight)

        # Back in this process: stepping through that replay tokenizes nothing.
        REPLAYS.forget_replays()
        cache.clear()

        class Refuse:
            def encode_ordinary(self, text):
                raise AssertionError(f"tokenized again: {text[:60]!r}")

        monkeypatch.setattr(tokens.get_counter("cl100k_base"), "_encoding", Refuse())
        detail = services.call_detail(long_session, tight, run, 20)
        assert detail.view.counts["rewritten"] > 0


def test_counts_tokenized_for_one_session_are_never_filed_under_another(
    personas, stored, long_session
):
    from ctxsim.pipeline import tokens
    from ctxsim.replays import services
    from ctxsim.replays.cache import REPLAYS
    from ctxsim.replays.models import DerivedTokenCount
    from ctxsim.replays.state import settings_from_query

    tight = settings_from_query(
        QueryDict("profile=chatcli&env.CHATCLI_MICROCOMPACT_HEAD_CHARS=1234"), personas.team)[0]
    with REPLAYS.another_process():
        counter = tokens.get_counter("cl100k_base")
        # A trace of one session tokenizes previews only it has (and stores none of them)...
        with counter.recording() as traced:
            services.trace_json(long_session, tight)
        assert traced
        # ...then a summary replay of another session stores what it tokenized, not those.
        services.summary_for(stored, services.ReplaySettings())
    filed = set(DerivedTokenCount.objects.filter(session=stored).values_list("digest", flat=True))
    assert not filed & {digest.hex() for digest in traced}
