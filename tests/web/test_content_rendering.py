"""Content rendering in the call view: pretty JSON with a raw toggle, highlighted code and
diffs, Edit / apply_patch inputs as diffs, always from escaped text (issue 19)."""

from __future__ import annotations

import html as html_module
import json
import re

import pytest
from django.urls import reverse

from ctxsim.pipeline.messages import Message, Session, ToolCall
from ctxsim.transcripts.store import save_sessions

pytestmark = pytest.mark.django_db

EDIT_ARGS = json.dumps({"file_path": "src/app.py", "old_string": "x = 1\nprint(x)\n",
                        "new_string": "x = 2\nprint(x)\n"})
PATCH = ("*** Begin Patch\n*** Update File: src/app.py\n@@\n-x = 1\n+x = <b>2</b>\n"
         "*** End Patch\n")
PYTHON = "def greet(name):\n    return f'hello {name}'  # <script>alert(1)</script>\n"


def session() -> Session:
    return Session(format="openai-chat", title="rendering", messages=(
        Message.of("user", "Fix it"),
        Message.of("assistant", "", tool_calls=[
            ToolCall("c1", "Read", json.dumps({"file_path": "src/greet.py", "limit": 20})),
        ]),
        Message.of("tool", PYTHON, tool_call_id="c1"),
        Message.of("assistant", "", tool_calls=[ToolCall("c2", "Edit", EDIT_ARGS)]),
        Message.of("tool", json.dumps({"output": "Edited src/app.py\nok", "metadata": {
            "exit_code": 0, "duration_seconds": 0.1}}), tool_call_id="c2"),
        Message.of("assistant", "", tool_calls=[
            ToolCall("c3", "apply_patch", json.dumps({"input": PATCH}))]),
        Message.of("tool", "Done!", tool_call_id="c3"),
        Message.of("assistant", "All fixed."),
        Message.of("user", "thanks"),
    ))


@pytest.fixture
def html(personas) -> str:
    row = save_sessions([session()], team=personas.team)[0]
    url = reverse("session-detail", args=[row.pk]) + "?profile=none&call=3"
    return personas.client("viewer").get(url).content.decode()


def message(html: str, index: int) -> str:
    return html.split(f'id="msg-3-{index}"')[1].split('<li class="msg')[0]


def test_tool_arguments_are_pretty_printed_json_with_the_raw_text_one_click_away(html):
    read = message(html, 1)
    assert '<pre class="code json hl">' in read
    pretty = re.sub(r"<[^>]+>", "", read.split('<pre class="code json hl">')[1].split("</pre>")[0])
    assert '"file_path": "src/greet.py",\n' in html_module.unescape(pretty)
    raw = read.split('<details class="raw">')[1].split("</details>")[0]
    assert "{&quot;file_path&quot;: &quot;src/greet.py&quot;, &quot;limit&quot;: 20}" in raw


def test_code_a_tool_read_is_highlighted_from_escaped_text(html):
    result = message(html, 2)
    body = result.split('<pre class="body code hl"')[1].split("</pre>")[0]
    assert '<span class="k">def</span>' in body
    assert "<script>" not in body and "&lt;script&gt;" in re.sub(r"<span[^>]*>|</span>", "",
                                                                  body)


def test_an_edit_input_is_shown_as_a_diff(html):
    edit = message(html, 3)
    diff = edit.split('<pre class="code diff-view hl">')[1].split("</pre>")[0]
    text = re.sub(r"<[^>]+>", "", diff)
    assert "-x = 1" in text and "+x = 2" in text and "src/app.py" in text
    assert '<span class="gd">' in diff and '<span class="gi">' in diff


def test_an_apply_patch_input_is_shown_as_a_highlighted_diff_of_escaped_text(html):
    patch = message(html, 5)
    diff = patch.split('<pre class="code diff-view hl">')[1].split("</pre>")[0]
    assert "<b>" not in diff
    assert "+x = &lt;b&gt;2&lt;/b&gt;" in re.sub(r"<span[^>]*>|</span>", "", diff)


def test_a_codex_output_result_shows_its_output_as_text_and_the_rest_as_json(html):
    result = message(html, 4)
    assert "Edited src/app.py\nok" in re.sub(r"<span[^>]*>|</span>", "", result)
    assert '<details class="raw">' in result
    assert '"exit_code": 0' in html_module.unescape(re.sub(r"<span[^>]*>|</span>", "", result))


def test_plain_text_is_left_alone(html):
    assert '<pre class="body" id="body-3-0">Fix it</pre>' in message(html, 0)
