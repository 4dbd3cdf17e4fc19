"""The cleaning fast paths against the plain cleaning they replaced (every regex, every time).

Each step of ``_normalize`` now runs only when a cheap check says it can change the text, and
``_drop_short_lines`` decides from stripped lengths when it can; on random tricky documents
(controls C0 and C1, CR, trailing spaces of every kind, blank-line runs, non-NFC, non-ASCII,
whitespace-only lines, one-character lines) the output and every counter must stay the same.
"""

from __future__ import annotations

import random
import re
import unicodedata

import pytest

from data_io.prepare.normalize import CleanOptions, CleanStats
from tests.prepare import clean_oracle
from tests.prepare.clean_oracle import clean_batch


def _plain_normalize(text: str, stats: CleanStats) -> str:
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
        stats.unicode_normalized += 1
    cleaned = text
    if "\r" in cleaned:
        cleaned = cleaned.replace("\r\n", "\n").replace("\r", "\n")
    without = clean_oracle._CONTROL.sub("", cleaned)
    stats.controls_removed += without != cleaned
    cleaned = without
    cleaned = clean_oracle._TRAILING_SPACE.sub("", cleaned)
    cleaned = clean_oracle._BLANK_RUNS.sub("\n\n", cleaned).strip()
    if cleaned != text:
        stats.whitespace_cleaned += 1
    return cleaned


def _plain_drop_short_lines(text: str, minimum: int, stats: CleanStats) -> str:
    if minimum <= 1:
        return text
    lines = text.split("\n")
    kept = [line for line in lines if not line.strip() or len("".join(line.split())) >= minimum]
    if len(kept) == len(lines):
        return text
    stats.short_lines_dropped += len(lines) - len(kept)
    return "\n".join(kept).strip()


_PIECES = [
    "word",
    "a",
    "é",
    "e\u0301",  # not NFC
    "\u00c5",
    " ",
    "\t",
    "\u00a0",
    "\u3000",
    "\u2003",  # EM SPACE: whitespace, but not trailing space to the regex
    "\n",
    "\n\n\n",
    "\r",
    "\r\n",
    "\x00",
    "\x07",
    "\x0b",
    "\x0c",
    "\x1f",
    "\x7f",
    "\x80",
    "\x85",
    "\x9f",
    "\xa0x",
    "\u00bf",  # a \xc2 lead byte in UTF-8 that is not a control
    "€",
    "😀",
]


def _document(rng: random.Random) -> str:
    return "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 40)))


@pytest.mark.parametrize("seed", range(30))
def test_clean_matches_the_plain_cleaning(monkeypatch: pytest.MonkeyPatch, seed: int):
    rng = random.Random(seed)
    texts = [_document(rng) for _ in range(200)]
    for minimum in (0, 1, 2, 3, 5):
        options = CleanOptions(min_line_chars=minimum, min_doc_chars=rng.randint(0, 6))
        fast_stats, plain_stats = CleanStats(), CleanStats()
        fast = clean_batch(texts, options, fast_stats)
        with monkeypatch.context() as patch:
            patch.setattr(clean_oracle, "_normalize", _plain_normalize)
            patch.setattr(clean_oracle, "_drop_short_lines", _plain_drop_short_lines)
            plain = clean_batch(texts, options, plain_stats)
        assert fast == plain
        assert fast_stats == plain_stats


@pytest.mark.parametrize(
    "text",
    [
        "x \n",
        "x\t",
        "x\u00a0\ny",
        "x\u3000",
        "x\u2003\ny",  # not in the trailing set: kept
        "a\x85b",
        "a\u00bfb",
        "a\x1bb",
        "a\n\n\n\nb",
        "a\r\r\rb",
        "  lead",
        "plain text",
    ],
)
def test_each_check_agrees_with_its_regex(text: str):
    assert clean_oracle._has_control(text) == bool(clean_oracle._CONTROL.search(text))
    assert clean_oracle._has_trailing_space(text) == bool(clean_oracle._TRAILING_SPACE.search(text))
    assert ("\n\n\n" in text) == bool(re.search(r"\n{3,}", text))
    assert _plain_normalize(text, CleanStats()) == clean_oracle._normalize(text, CleanStats())


def test_one_character_lines_are_dropped_by_the_fast_check():
    stats = CleanStats()
    text = "a long line\n x \nanother long line\n\n  \nyz"
    assert (
        clean_oracle._drop_short_lines(text, 2, stats) == "a long line\nanother long line\n\n  \nyz"
    )
    assert stats.short_lines_dropped == 1
    assert clean_oracle._drop_short_lines("ab\n c d ", 2, stats) == "ab\n c d "
    assert stats.short_lines_dropped == 1
