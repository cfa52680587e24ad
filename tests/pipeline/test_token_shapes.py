"""Counting by digit shape gives exactly the encoder's count (tokens.digit_shape)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxsim.pipeline.token_cuts import _CLASSES, digit_touches_non_ascii
from ctxsim.pipeline.tokens import TiktokenCounter, digit_shape, get_encoding

ENCODINGS = ("cl100k_base", "o200k_base")


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_string_of_one_to_three_digits_is_one_token(name):
    encoding = get_encoding(name)
    for width in (1, 2, 3):
        for n in range(10**width):
            assert len(encoding.encode_ordinary(str(n).zfill(width))) == 1, (name, n, width)


# Text near digits: ASCII punctuation, letters, spaces, and non-ASCII numerals and marks that
# the pre-tokenizer could join with digits.
ALPHABET = "0123456789_./-:[]() \n\tabcXYZ—½²٣é"


@settings(max_examples=400)
@given(st.text(alphabet=ALPHABET, max_size=60), st.sampled_from(ENCODINGS))
def test_a_shared_shape_never_changes_the_count(text, name):
    content = text.encode("utf-8")
    counter = TiktokenCounter(name)
    encoding = get_encoding(name)
    shape = digit_shape(content)
    if shape is not None:
        # Counting a sibling first fills the shape cache; the content must still count true.
        counter.count(shape)
    assert counter.count(content) == len(encoding.encode_ordinary(text))


def test_a_respilled_preview_is_tokenized_once_per_shape():
    counter = TiktokenCounter("cl100k_base")
    first = b"head\n\n... [5 chars omitted \xe2\x80\x94 saved to /tmp/budget_call_7_12.txt]\n\n"
    again = first.replace(b"_12.txt", b"_47.txt")
    counter.count(first)
    assert counter.shape_count(again) == counter.count(first)
    assert digit_shape("½1".encode()) is None  # a digit next to another numeral: exact path


@settings(max_examples=500)
@given(st.lists(st.sampled_from(["1", "42", "a", " ", "\n", "—", "é", "½", "漢字", "—" * 30]),
                max_size=80))
def test_a_digit_next_to_a_non_ascii_byte_is_found_as_the_two_scans_find_it(parts):
    """`digit_touches_non_ascii` walks the few non-ASCII bytes of a text (a spill preview's
    em dash) instead of scanning it twice; past _WALK_BYTES of them it scans. Either way its
    answer is the scans'."""
    classes = "".join(parts).encode("utf-8").translate(_CLASSES)
    assert digit_touches_non_ascii(classes) == (b"\x800" in classes or b"0\x80" in classes)
