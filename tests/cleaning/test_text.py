"""data_io.cleaning.text: Arrow column operations equal to Python's string methods."""

from __future__ import annotations

import random
import sys

import pyarrow as pa

from data_io.cleaning.text import py_strip, python_whitespace


def test_whitespace_is_what_str_strip_removes() -> None:
    spaces = python_whitespace()
    assert spaces.strip() == ""
    assert all(ch.isspace() for ch in spaces)
    # Characters Arrow's utf8_trim_whitespace does not trim, and ones Python does not strip.
    assert {"\x1c", "\x1f", "\x85", "\xa0", "\u3000"} <= set(spaces)
    assert not {"\u200b", "\ufeff", "\u180e"} & set(spaces)
    # Independent count: every code point Python calls whitespace.
    assert len(spaces) == sum(chr(i).isspace() for i in range(sys.maxunicode + 1))


def test_py_strip_equals_str_strip() -> None:
    rng = random.Random(5)
    alphabet = [*python_whitespace(), "a", "é", "\u200b", "\ufeff", "语", "\U0001f600", "\\"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(12))) for _ in range(3000)]
    values = pa.chunked_array([texts[:1000], [*texts[1000:], None]])
    stripped = py_strip(values).to_pylist()
    assert stripped == [*(text.strip() for text in texts), None]
