"""One number format on every page (issue 26): thousands separators, signed money (−$90.89),
a sentence's numbers grouped up to its full stop; the overview's whole table reads so."""

from __future__ import annotations

import re

import pytest
from django.template import Context, Template

from ctxsim.replays.templatetags.numbers import dollars, group_numbers, grouped
from tests.web.test_overview import URL, corpus, run_queued_figures


@pytest.mark.parametrize(("value", "text"), [
    (3928738, "3,928,738"), (-2261, "\u22122,261"), (0, "0"), (1234.5, "1,234.5"),
    (12.0, "12"), (None, ""), (True, "True"),
])
def test_grouped(value, text):
    assert grouped(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (-90.8922, "\u2212$90.89"), (90.8922, "$90.89"), (1234.567, "$1,234.57"),
    (0.01234, "$0.0123"), (0, "$0.00"), (-0.00001, "$0.0000"), (None, ""),
])
def test_dollars(value, text):
    assert dollars(value) == text


def test_a_sentence_is_grouped_up_to_its_full_stop():
    assert group_numbers("170000 tokens, below the threshold 167000.") == (
        "170,000 tokens, below the threshold 167,000.")
    assert group_numbers("see a1234.py, v2025.10, X=20000") == "see a1234.py, v2025.10, X=20000"


def test_the_filters_are_the_helpers():
    html = Template("{% load numbers %}{{ a|num }} {{ b|money }}").render(
        Context({"a": 180985224, "b": -90.8922}))
    assert html == "180,985,224 \u2212$90.89"


@pytest.mark.django_db
def test_no_figure_of_the_overview_table_is_an_ungrouped_number(personas):
    corpus(personas, n=3, calls=30)
    client = personas.client("viewer")
    client.get(f"{URL}?profiles=chatcli&profiles=none")
    run_queued_figures()
    html = client.get(f"{URL}?profiles=chatcli&profiles=none").content.decode()
    table = html[html.index('class="grid overview-figures"'):]
    table = table[:table.index("</table>")]
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", table)]
    assert cells and not [c for c in cells if re.search(r"(?<![\d.])\d{4,}", c)]
    assert any(re.search(r"\d,\d{3}", c) for c in cells)
    assert not [c for c in cells if "$-" in c]
