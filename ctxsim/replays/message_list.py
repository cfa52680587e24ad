"""The call view's message list, rendered in Python.

A late call of a long session sends thousands of messages; the template engine spends about
2 ms per row on them, this renderer a few microseconds. Every piece of transcript text goes
through `escape()` here, exactly as the template's autoescaping would: content, names, ids and
arguments are untrusted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape as _escape
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from ctxsim.replays import rendering
from ctxsim.replays.templatetags.numbers import grouped

_SPECIAL = re.compile(r"[&<>\"']")


def escape(value: object) -> str:
    """HTML-escape like Django's `escape` (same five characters), minus its lazy-string
    wrapper, which cost more than the rest of the renderer on long calls; most strings (roles,
    names, ids) have nothing to escape and are returned after one scan."""
    text = str(value)
    return _escape(text, quote=True) if _SPECIAL.search(text) else text


def _badge(status: str, stage: str) -> str:
    label = f"{status} · {stage}" if stage else status
    return f'<span class="badge status-{status}">{escape(label)}</span>'


def diff_html(d: Mapping[str, Any], element_id: str = "") -> str:
    """A diff entry (see `page.diff_entry`) as HTML; every text part escaped."""
    id_attr = f' id="{element_id}"' if element_id else ""
    parts = [f'<div class="diff"{id_attr}>']
    if d["prefix_hidden"]:
        parts.append(f'<span class="skip">… {grouped(d["prefix_hidden"])} bytes unchanged …</span>')
    parts.append(f'<span class="same">{escape(d["prefix"])}</span>')
    if d["removed_bytes"]:
        more = (f' … [{grouped(d["removed_bytes"])} bytes removed in all]'
                if d["removed_bytes"] > 400 else "")
        parts.append(f'<del title="{grouped(d["removed_bytes"])} bytes removed">'
                     f'{escape(d["removed"])}{more}</del>')
    parts.append(f"<ins>{escape(d['added'])}</ins>")
    if d["added_hidden"]:
        parts.append(f'<span class="skip">… {grouped(d["added_hidden"])} more bytes …</span>')
    parts.append(f'<span class="same">{escape(d["suffix"])}</span>')
    if d["suffix_hidden"]:
        parts.append(f'<span class="skip">… {grouped(d["suffix_hidden"])} bytes unchanged</span>')
    parts.append("</div>")
    return "".join(parts)


def row_tools(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The tool names a call-view row is about: the tool it answers, the tools it calls."""
    names = [entry["row"].tool_name] if entry["row"].tool_name else []
    names += [call.name for call in entry["calls"]]
    return tuple(dict.fromkeys(n for n in names if n))


def show_all_link(url: str, element_id: str, *, more: bool, oob: bool = False) -> SafeString:
    """The toggle under a collapsed body: "show all" loads the whole text, "show less" the
    collapsed one again (each response swaps the link for the other, out of band)."""
    url = escape(url)
    body = element_id.replace("toggle-", "body-", 1)
    swap = ' hx-swap-oob="true"' if oob else ""
    label = "show all" if more else "show less"
    return mark_safe(  # noqa: S308 - the URL is escaped, the rest is ours
        f'<a class="show-all" id="{element_id}" href="{url}" hx-get="{url}" '
        f'hx-target="#{body}" hx-swap="outerHTML"{swap}>{label}</a>')


def _raw(text: str, tag: str = "pre", cut: int = 4000, summary: str = "raw") -> str:
    """The raw text behind a pretty view, one click away."""
    shown = text if len(text) <= cut else text[: cut - 1] + "…"
    return (f'<details class="raw"><summary>{summary}</summary><{tag} class="raw-text">'
            f"{escape(shown)}</{tag}></details>")


def _tool_call(call, budget: rendering.Budget) -> str:
    """A tool call: an edit's input as a diff, JSON arguments indented (each with the raw
    arguments behind a toggle), anything else as its raw text."""
    head = (f'<div class="toolcall"><span class="tool">{escape(call.name)}</span> '
            f'<small class="muted">{escape(call.id)}</small>')
    view = None
    diff = rendering.input_diff(call.name, call.arguments)
    if diff is not None and (html := rendering.highlight(diff, rendering.diff_lexer(),
                                                         budget)) is not None:
        view = f'<pre class="code diff-view hl">{html}</pre>'
    elif (pretty := rendering.pretty_json(call.arguments)) is not None and (
            html := rendering.highlight(pretty, rendering.json_lexer(), budget)) is not None:
        view = f'<pre class="code json hl">{html}</pre>'
    if view is None:
        args = call.arguments if len(call.arguments) <= 400 else call.arguments[:399] + "…"
        return f'{head} <code class="args">{escape(args)}</code></div>'
    return f"{head}{view}{_raw(call.arguments, 'code')}</div>"


def _body(e: Mapping[str, Any], body_id: str, hidden: str, path: str,
          budget: rendering.Budget) -> str:
    """A message body: a JSON tool result carrying a text as that text (`page.tool_output`),
    other JSON indented, code and diffs highlighted, the rest as escaped text."""
    text, row = e["text"], e["row"]
    # A JSON tool output shown as its text has the JSON one click away, after the text.
    after = _raw(e["json"], summary="JSON", cut=len(e["json"])) if e.get("json") else ""
    is_tool = row.message.role == "tool"
    if is_tool and not after and not e["hidden"] and (
            pretty := rendering.pretty_json(text)) is not None and (
            html := rendering.highlight(pretty, rendering.json_lexer(), budget)) is not None:
        return f'<pre class="body code json hl" id="{body_id}">{html}</pre>{_raw(text)}'
    lexer = None
    if is_tool:
        lexer = (rendering.diff_lexer() if rendering.looks_like_diff(text)
                 else rendering.lexer_for_path(path) if path else None)
    if lexer is not None and (html := rendering.highlight(text, lexer, budget)) is not None:
        return f'<pre class="body code hl" id="{body_id}">{html}{hidden}</pre>{after}'
    return f'<pre class="body" id="{body_id}">{escape(text)}{hidden}</pre>{after}'


def render_rows(
    entries: Sequence[Mapping[str, Any]],
    *,
    session_id: int,
    call_index: int,
    query: str,
) -> list[tuple[int, int | None, str]]:
    """One call's rows as (row index, message origin, HTML of the `<li>` left open): the part
    of the call view that depends only on the replay, so it can be cached and shared, with
    per-viewer pieces (comment boxes) added by `join_rows`."""
    body_url = reverse("session-message", args=[session_id])
    # One reverse() for every spill link: a spill's part is `<run key>/<seq>`.
    spill_url = reverse("spill-view", args=[session_id, "run", 0])[: -len("run/0/")]
    budget = rendering.Budget()
    paths: dict[str, str] = {}  # tool call id -> the file it names, for its result's lexer
    out = []
    for e in entries:
        row, index = e["row"], e["index"]
        m = row.message
        anchor = f"msg-{call_index}-{index}"
        head = [f'<span class="role">{escape(m.role)}</span>']
        if row.tool_name:
            head.append(f'<span class="tool">{escape(row.tool_name)}</span>')
        head.append(_badge(row.status, row.stage))
        if m.origin is not None:
            head.append(f'<small class="muted">message {m.origin}</small>')
        if m.is_error:
            code = f" {escape(m.error_code)}" if m.error_code else ""
            head.append(f'<span class="badge bad">error{code}</span>')
        tokens = row.tokens or row.raw_tokens
        raw_note = (f" <small>(raw {grouped(row.raw_tokens)})</small>"
                    if row.status in ("rewritten", "spilled") else "")
        head.append(f'<span class="tokens">{grouped(tokens)} tok{raw_note}</span>')
        tools = " ".join("_".join(name.split()) for name in row_tools(e))
        parts = [f'<li class="msg status-{row.status} role-{escape(m.role)}" id="{anchor}" '
                 f'data-origin="{"" if m.origin is None else m.origin}" '
                 f'data-tools="{escape(tools)}">',
                 f'<div class="msg-head">{"".join(head)}</div>']
        if row.spill is not None:
            url = f"{spill_url}{row.spill.ref}/"
            parts.append(f'<p class="spill-link">Spilled to <a href="{url}">'
                         f"{escape(row.spill.path)}</a> ({grouped(row.spill.size)} bytes)</p>")
        if "diff" in e:
            parts.append(diff_html(e["diff"]))
        else:
            body_id = f"body-{call_index}-{index}"
            if e["carried"] and row.status == "removed":
                parts.append('<p class="carried muted">Removed before this call.</p>')
            elif e["carried"]:
                url = escape(f"{body_url}?{query}&call={call_index}&row={index}&diff=1")
                parts.append(f'<p class="carried muted">Rewritten before this call, sent as '
                             f'it was. <a class="show-diff" href="{url}" hx-get="{url}" '
                             f'hx-target="#{body_id}" hx-swap="outerHTML">show the change</a>'
                             f'</p>')
            hidden = (f'<span class="skip">… {grouped(e["hidden"])} more bytes</span>'
                      if e["hidden"] else "")
            path = paths.get(m.tool_call_id, "") if m.tool_call_id else ""
            parts.append(_body(e, body_id, hidden, path, budget))
            if e["hidden"]:
                parts.append(show_all_link(f"{body_url}?{query}&call={call_index}&row={index}",
                                           f"toggle-{call_index}-{index}", more=True))
        for call in e["calls"]:
            paths[call.id] = rendering.path_of(call.arguments)
            parts.append(_tool_call(call, budget))
        if m.tool_call_id:
            parts.append(f' <small class="muted answers">answers {escape(m.tool_call_id)}'
                         f'</small>')
        out.append((index, m.origin, "".join(parts)))
    return out


@dataclass(frozen=True)
class Fold:
    """Rows [start, end) of a call view folded into one counted row, loaded on demand."""

    start: int
    end: int
    tokens: int | None = None  # None once split around a commented row (see `call_view.unfold`)
    status: str | None = None  # what happened to every row, when they were changed alike

    @property
    def what(self) -> str:
        """The fold's words for its rows ("not changed at this call", or their status)."""
        plural = "message" if self.count == 1 else "messages"
        if self.status is None:
            return f"{self.count:,} {plural} not changed at this call"
        return f"{self.count:,} {plural} {self.status}"

    @property
    def count(self) -> int:
        return self.end - self.start


def fold_html(fold: Fold, *, session_id: int, call_index: int, query: str) -> str:
    """One folded run as a `<li>` whose link loads its rows in place (htmx) or, without
    JavaScript, opens them on a page of their own."""
    status = f"&fold={fold.status}" if fold.status else ""
    url = escape(f"{reverse('session-rows', args=[session_id])}?{query}&call={call_index}"
                 f"&from={fold.start}&to={fold.end}{status}")
    tokens = f", {fold.tokens:,} tok" if fold.tokens is not None else ""
    element = f"fold-{call_index}-{fold.start}"
    return (f'<li class="fold" id="{element}" data-from="{fold.start}" data-to="{fold.end}">'
            f'<a class="unfold" href="{url}" hx-get="{url}" hx-target="#{element}" '
            f'hx-swap="outerHTML">{escape(fold.what)}{tokens} — show</a></li>')


def join_rows(rows: Sequence[tuple[int, int | None, str]],
              extras: Mapping[int, str] | None = None, *, folds: Sequence[Fold] = (),
              fold_link: Mapping[str, Any] | None = None, wrap: bool = True) -> SafeString:
    """The `<ol class="messages">` of one call (or, without `wrap`, its `<li>`s alone).
    `extras` maps a row index to HTML (already safe) placed at the end of that row, e.g. its
    comment box; `folds` are placed between the rows by position (`fold_link` holds
    `fold_html`'s keyword arguments)."""
    extras = extras or {}
    parts = []
    pending = sorted(folds, key=lambda f: f.start)
    f = 0
    for index, _origin, opened in rows:
        while f < len(pending) and pending[f].start < index:
            parts.append(fold_html(pending[f], **(fold_link or {})))
            f += 1
        parts.append(f"{opened}{extras.get(index, '')}</li>")
    parts.extend(fold_html(fold, **(fold_link or {})) for fold in pending[f:])
    html = "".join(parts)
    if not wrap:
        return mark_safe(html)  # noqa: S308 - escaped above
    return mark_safe(f'<ol class="messages">{html}</ol>')  # noqa: S308 - escaped above
