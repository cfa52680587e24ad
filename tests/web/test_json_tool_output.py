"""A tool result that is JSON carrying a text (Codex `function_call_output`, an observation's
`content`, MCP text parts) shows as that text, long or short, with the JSON one click away; and
always as escaped text (issue 26)."""

from __future__ import annotations

import html as html_module
import json
import re

import pytest
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

LONG = "".join(f"{n:6}\tdata line {n} <b>bold</b>\n" for n in range(1, 2001))  # ~60 kB
SHORT = "total 8\n-rw-r--r-- 1 me me 42 setup.py\n"


def session() -> Session:
    def call(n, output):
        return (Message.of("assistant", "", tool_calls=[ToolCall(f"c{n}", "shell", "{}")]),
                Message.of("tool", output, tool_call_id=f"c{n}"))
    return Session(format="codex", title="json outputs", messages=(
        Message.of("user", "Look"),
        *call(1, json.dumps({"output": LONG, "metadata": {"exit_code": 0}})),
        *call(2, json.dumps({"output": SHORT, "metadata": {"exit_code": 0}})),
        *call(3, json.dumps({"content": "observed\nthing", "extras": {"path": "/w"}})),
        *call(4, json.dumps([{"type": "text", "text": "part one"},
                             {"type": "text", "text": "part two"}])),
        Message.of("assistant", "Done."),
    ))


@pytest.fixture
def shown(personas):
    """(session, client, the call view of the call that follows result `index`)."""
    row = save_sessions([session()], team=personas.team)[0]
    client = personas.client("viewer")

    def call_view(index: int) -> str:
        url = reverse("session-detail", args=[row.pk]) + f"?profile=none&call={index // 2}"
        return client.get(url).content.decode()
    return row, client, call_view


def _row(html: str, index: int) -> str:
    return html.split(f'id="msg-{index // 2}-{index}"')[1].split('<li class="msg')[0]


def _body(row_html: str) -> str:
    body = row_html.split('<pre class="body"')[1].split("</pre>")[0]
    return html_module.unescape(body.split(">", 1)[1])


def test_a_long_codex_output_shows_as_text_collapsed_with_the_json_one_click_away(shown):
    _, _, view = shown
    row = _row(view(2), 2)
    body = _body(row)
    assert "     1\tdata line 1 <b>bold</b>\n     2\tdata line 2" in body
    assert '{"output"' not in body and "\\n" not in body
    assert "<b>bold</b>" not in row  # escaped, never markup
    assert "more bytes" in body and "show all" in row
    json_view = row.split('<details class="raw"><summary>JSON</summary>')[1]
    assert '"output": "     1\\tdata line 1' in html_module.unescape(json_view)


def test_show_all_loads_the_whole_output_as_text(shown):
    row, client, view = shown
    link = html_module.unescape(re.search(r'class="show-all" id="toggle-1-2" href="([^"]+)"',
                                          view(2)).group(1))
    full = client.get(link, headers={"HX-Request": "true"}).content.decode()
    text = html_module.unescape(full.split("</pre>")[0])
    assert text.endswith("  2000\tdata line 2000 <b>bold</b>\n")
    assert '{"output"' not in text and "&lt;b&gt;" in full


@pytest.mark.parametrize(("index", "text"), [(4, SHORT), (6, "observed\nthing"),
                                             (8, "part one\npart two")])
def test_short_json_outputs_show_as_their_text(shown, index, text):
    _, _, view = shown
    row = _row(view(index), index)
    assert _body(row).startswith(text)
    assert '<summary>JSON</summary>' in row


def test_the_answers_line_is_apart_from_show_all(shown):
    _, _, view = shown
    text = re.sub(r"<[^>]+>", "", _row(view(2), 2))
    assert "show all answers c1" in text
