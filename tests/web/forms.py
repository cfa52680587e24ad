"""A form as a browser submits it, read from the page's rendered HTML.

`read_form(html, form_id)` parses the page with the standard library's HTML parser and gives the
form's controls with what a browser would send for them untouched (the HTML standard's rules
that matter here): a text input's value loses its line breaks (the value sanitisation
algorithm), a textarea loses the one line feed right after its start tag and sends its text
with line breaks as CRLF, a select sends its selected option (the first when none is), an
option without a value attribute sends its text, unchecked checkboxes send nothing, and
buttons are not part of the submission unless pressed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Control:
    name: str
    tag: str  # input | select | textarea
    type: str = "text"  # an input's type; "select" / "textarea" for the others
    value: str = ""
    options: list[str] = field(default_factory=list)
    checked: bool = True
    max: str = ""  # a number input's rendered maximum


class _FormParser(HTMLParser):
    def __init__(self, form_id: str):
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.found = False
        self.controls: list[Control] = []
        self._select: Control | None = None
        self._selected: str | None = None
        self._option: dict | None = None
        self._textarea: Control | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = self.found = True
            return
        if not self.inside:
            return
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = (a.get("type") or "text").lower()
            if kind in ("submit", "button", "reset", "image", "file"):
                return
            value = a.get("value") or ""
            if kind in ("checkbox", "radio"):
                self.controls.append(Control(name, "input", kind, a.get("value") or "on",
                                             checked="checked" in a))
                return
            if kind != "hidden":
                value = value.replace("\r", "").replace("\n", "")
            self.controls.append(Control(name, "input", kind, value, max=a.get("max") or ""))
        elif tag == "select" and name:
            self._select = Control(name, "select", "select")
            self._selected = None
        elif tag == "option" and self._select is not None:
            self._option = {"value": a.get("value"), "text": "", "selected": "selected" in a}
        elif tag == "textarea" and name:
            self._textarea = Control(name, "textarea", "textarea")

    def handle_data(self, data):
        if self._option is not None:
            self._option["text"] += data
        elif self._textarea is not None:
            self._textarea.value += data

    def handle_endtag(self, tag):
        if tag == "form" and self.inside:
            self.inside = False
        elif tag == "option" and self._option is not None:
            self._close_option()
        elif tag == "select" and self._select is not None:
            if self._option is not None:
                self._close_option()
            select = self._select
            select.value = (self._selected if self._selected is not None
                            else select.options[0] if select.options else "")
            self.controls.append(select)
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            area = self._textarea
            if area.value.startswith("\n"):  # the parser drops the first line feed
                area.value = area.value[1:]
            area.value = area.value.replace("\r\n", "\n").replace("\n", "\r\n")
            self.controls.append(area)
            self._textarea = None

    def _close_option(self):
        option = self._option
        value = option["value"] if option["value"] is not None else option["text"].strip()
        self._select.options.append(value)
        if option["selected"]:
            self._selected = value
        self._option = None


def read_form(html: str, form_id: str) -> list[Control]:
    """The controls of the form `id=form_id`, in document order (selects at their end tag)."""
    parser = _FormParser(form_id)
    parser.feed(html)
    parser.close()
    assert parser.found, f"no form #{form_id} in the page"
    return parser.controls


def submission(controls: list[Control], **changes: str) -> list[tuple[str, str]]:
    """The (name, value) pairs a browser sends, with `changes` typed into named controls."""
    out = []
    for control in controls:
        if control.type in ("checkbox", "radio") and not control.checked:
            continue
        out.append((control.name, changes.get(control.name, control.value)))
    return out
