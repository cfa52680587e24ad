"""A search hit lands on its message (issue 26): the call view shows that message (out of its
fold, far enough to hold the words) and says which words to highlight; the call view's Find
reads a query as the search does, and counts right."""

from __future__ import annotations

import html as html_lib
import json
import re

import pytest
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.search import index_sessions, search
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

NEEDLE = "TimeDelta serialization"
# A long, quiet tool result: the call view cuts an unchanged message after 300 bytes, and the
# words are at about 1,500.
LONG = "ok line\n" * 190 + "TimeDelta <b>serialization</b> rounds wrongly\n" + "ok line\n" * 40
TOOLS = 12


def transcript(tools: int = TOOLS, long_at: int = 1, long: str = LONG,
               filler: str = "result {n}") -> Session:
    """`tools` calls, each a tool result; the result of call `long_at` is `long` (message
    index 2 * long_at + 3), the others `filler`."""
    messages = [Message.of("system", "You fix bugs."), Message.of("user", "Fix the field.")]
    for n in range(tools):
        messages += [
            Message.of("assistant", "", tool_calls=[ToolCall(f"c{n}", "run", f'{{"n": {n}}}')]),
            Message.of("tool", long if n == long_at else filler.format(n=n),
                       tool_call_id=f"c{n}"),
        ]
    return Session(format="openai-chat", title="marshmallow",
                   messages=(*messages, Message.of("assistant", "Done.")))


@pytest.fixture
def session(personas):
    rows = save_sessions([transcript()], team=personas.team, user=personas.users["owner"])
    index_sessions(rows)
    return rows[0]


def rows(html: str) -> dict[int, str]:
    """The call view's rows by message index (origin)."""
    found = re.findall(r'<li class="msg [^"]*" id="msg-\d+-\d+" data-origin="(\d+)"(.*?)</li>',
                       html, re.S)
    return {int(origin): body for origin, body in found}


def highlight_terms(html: str) -> list[str] | None:
    found = re.search(r'<div id="call-view"[^>]* data-highlight="([^"]*)"', html)
    return json.loads(html_lib.unescape(found.group(1))) if found else None


def test_the_hit_opens_the_call_showing_the_message_with_its_words(personas, session):
    viewer = personas.client("viewer")
    (hit,) = search(personas.team, "serialization TimeDelta")
    assert hit.message_index == 5
    results = viewer.get(reverse("search"), {"q": "serialization TimeDelta"}).content.decode()
    link = html_lib.unescape(re.search(r'<li class="search-hit".*?href="([^"]+)"', results,
                                       re.S).group(1))
    assert link == (f"/sessions/{session.pk}/?call={hit.call_index}"
                    "&at=5&hl=serialization%20TimeDelta")
    opened = viewer.get(link, follow=True)
    assert opened.status_code == 200
    final = opened.redirect_chain[-1][0] if opened.redirect_chain else link
    assert "at=5" in final and "hl=serialization+TimeDelta" in final  # the canonical URL keeps them
    page = opened.content.decode()
    assert 'data-at="5"' in page
    assert highlight_terms(page) == ["serialization", "TimeDelta"]
    # Shown as far as the words, escaped like every transcript text.
    assert "TimeDelta &lt;b&gt;serialization&lt;/b&gt; rounds wrongly" in rows(page)[5]
    assert "<b>serialization" not in page


def test_a_later_call_unfolds_the_landed_message(personas, session):
    viewer = personas.client("viewer")
    last = f"/sessions/{session.pk}/?call={TOOLS}"
    plain = viewer.get(last, follow=True).content.decode()
    assert 5 not in rows(plain), "the quiet message is folded in a late call"
    landed = viewer.get(f"{last}&at=5&hl=TimeDelta", follow=True).content.decode()
    assert "TimeDelta &lt;b&gt;serialization" in rows(landed)[5]
    assert highlight_terms(landed) == ["TimeDelta"]


def test_the_landing_is_not_carried_to_other_calls(personas, session):
    page = personas.client("viewer").get(f"/sessions/{session.pk}/?call=3&at=5&hl=TimeDelta",
                                         follow=True).content.decode()
    links = re.findall(r'id="(?:prev|next)-call" rel="\w+" href="([^"]+)"', page)
    assert links and all("at=" not in link and "hl=" not in link for link in links)


def test_a_bad_landing_is_ignored(personas, session):
    viewer = personas.client("viewer")
    for query in ("at=x&hl=TimeDelta", "at=999&hl=%00", "at=-1&hl=", "at=5&hl=%22"):
        response = viewer.get(f"/sessions/{session.pk}/?call=3&{query}", follow=True)
        assert response.status_code == 200


def test_find_in_call_matches_every_word_in_any_order_and_counts_right(personas, session):
    viewer = personas.client("viewer")
    url = f"/sessions/{session.pk}/?call={TOOLS}"
    page = viewer.get(f"{url}&q=serialization+timedelta", follow=True).content.decode()
    assert list(rows(page)) == [5]
    assert highlight_terms(page) == ["serialization", "timedelta"]
    # Issue 26 "11 of 10": the count was of the rows the call view renders unfiltered (5
    # here, the rest folded); it is of all the call's rows.
    unfiltered = len(rows(viewer.get(url, follow=True).content.decode()))
    everything = viewer.get(f"{url}&q=result", follow=True).content.decode()
    found = len(rows(everything))
    assert found == TOOLS - 1 > unfiltered
    assert f"{found} of {2 + 2 * TOOLS} messages" in everything
    phrase = viewer.get(f'{url}&q="serialization+timedelta"', follow=True).content.decode()
    assert rows(phrase) == {} and "No message of this call matches the filter." in phrase


def test_an_assistant_message_lands_at_the_call_that_sends_it(personas, session):
    """SPEC §1: the k-th assistant message answers call k and is first sent at call k + 1,
    which is where the call view shows it."""
    viewer = personas.client("viewer")
    assistant = save_sessions([Session(format="openai-chat", title="plan", messages=(
        Message.of("user", "Plan it."),
        Message.of("assistant", "I will check the QUARTERLY_LEDGER first."),
        Message.of("user", "Go on."),
        Message.of("assistant", "QUARTERLY_LEDGER checked, all good."),
        Message.of("user", "Thanks."),
    ))], team=personas.team)
    index_sessions(assistant)
    hits = {h.message_index: h.call_index for h in search(personas.team, "quarterly_ledger")}
    assert hits == {1: 1, 3: 1}  # the last one: the call it answers; the page moves on
    pk = assistant[0].pk
    for at in (1, 3):
        page = viewer.get(f"/sessions/{pk}/?call={hits[at]}&at={at}&hl=quarterly_ledger",
                          follow=True)
        assert at in rows(page.content.decode())
    moved = viewer.get(f"/sessions/{pk}/?call=1&at=3&hl=x", follow=True).redirect_chain
    assert "call=2" in moved[-1][0]
