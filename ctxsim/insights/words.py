"""An index of tool results for substring searches of identifiers (issue 21): which results
contain a needle, without scanning every result for every needle (the loss tracker's lost
references, `loss.py`)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import islice

_WORD_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-"
_TO_SPACES = bytes(c if c in _WORD_BYTES else 32 for c in range(256))


GRAM = 4  # bytes; an identifier has at least four


class WordIndex:
    """Which seen tool results contain a needle made of word bytes (letters, digits and
    `_./-`, which is all an identifier holds): exactly those with a line holding a word (a
    maximal run of word bytes) that contains it. Tool output repeats lines and words a lot
    (files read again, logs), so the search looks at distinct words only: those holding the
    needle's rarest run of GRAM bytes, each checked; then word -> distinct lines -> results,
    each list in the order things were seen. Lists of numbers are arrays, which the garbage
    collector does not track (a long session holds hundreds of thousands of them).
    """

    def __init__(self) -> None:
        self.lines: dict[bytes, int] = {}
        self.results_of: list[array[int]] = []  # line -> the results holding it
        self.words: dict[bytes, int] = {}
        self.spelled: list[bytes] = []  # word -> its bytes
        self.lines_of: list[array[int]] = []  # word -> the lines holding it
        self.grams: dict[bytes, array[int]] = {}  # GRAM bytes -> the words holding them
        self.size = 0  # results indexed

    @staticmethod
    def searchable(needle: bytes) -> bool:
        return bool(needle) and needle.translate(_TO_SPACES) == needle and b" " not in needle

    def add(self, content: bytes) -> None:
        result, lines, results_of = self.size, self.lines, self.results_of
        self.size += 1
        found = set(content.split(b"\n"))
        for line in found.difference(lines):
            number = lines[line] = len(results_of)
            results_of.append(array("l"))
            for word in set(line.translate(_TO_SPACES).split()):
                known = self.words.get(word)
                if known is None:
                    known = self._new_word(word)
                self.lines_of[known].append(number)
        for known in map(lines.__getitem__, found):
            results_of[known].append(result)

    def _new_word(self, word: bytes) -> int:
        known = self.words[word] = len(self.spelled)
        self.spelled.append(word)
        self.lines_of.append(array("l"))
        grams = self.grams
        for gram in {word[i:i + GRAM] for i in range(len(word) - GRAM + 1)}:
            holders = grams.get(gram)
            if holders is None:
                grams[gram] = array("l", (known,))
            else:
                holders.append(known)
        return known

    def _words_with(self, needle: bytes, since: int) -> list[int]:
        """The words numbered `since` or more that contain `needle`."""
        spelled = self.spelled
        if len(needle) < GRAM:  # never for an identifier: every word is looked at
            return [w for w in range(since, len(spelled)) if needle in spelled[w]]
        grams = self.grams
        empty: array[int] = array("l")
        rarest = min((grams.get(needle[i:i + GRAM], empty)
                      for i in range(len(needle) - GRAM + 1)), key=len)
        return [w for w in islice(rarest, bisect_left(rarest, since), None)
                if needle in spelled[w]]

    def search(self, needle: bytes, state: list[int], words: list[int],
               lines: list[int]) -> list[int]:
        """The results indexed since the last search of this needle that contain it, in
        order. `state` (words, lines and results indexed then), `words` and `lines` (those
        found to contain it) are the needle's memo, updated here."""
        words_done, lines_done, results_done = state
        new_lines: set[int] = set()
        for word in words:  # words found before: the lines seen since that hold them
            places = self.lines_of[word]
            if places[-1] >= lines_done:
                new_lines.update(places[bisect_left(places, lines_done):])
        for word in self._words_with(needle, words_done):
            words.append(word)
            new_lines.update(self.lines_of[word])
        hits: set[int] = set()
        for line in lines:  # lines found before: the results seen since that hold them
            places = self.results_of[line]
            if places[-1] >= results_done:
                hits.update(places[bisect_left(places, results_done):])
        for line in new_lines:
            hits.update(self.results_of[line])
        lines.extend(sorted(new_lines))
        state[:] = [len(self.spelled), len(self.results_of), self.size]
        return sorted(hits)
