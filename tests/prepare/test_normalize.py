"""data_io.prepare.normalize's rules: each step, its counter, and switching it off; each example
run through prepare's Rust cleaner and the Python oracle, which must agree."""

from __future__ import annotations

import pytest

from data_io.errors import ConfigError
from data_io.prepare.normalize import CleanOptions, CleanStats
from tests.prepare.clean_oracle import clean_batch
from tests.prepare.test_clean_rust import rust_clean

LONG = "a sentence that is long enough to be kept"


def clean(texts: list[str], **options) -> tuple[list[str], CleanStats]:
    stats = CleanStats()
    kept = clean_batch(texts, CleanOptions(**options), stats)
    assert rust_clean(texts, CleanOptions(**options)) == (kept, stats.as_dict())
    return kept, stats


def test_nfc_composes_characters_and_is_counted():
    decomposed = "cafe\u0301 " + LONG
    out, stats = clean([decomposed, "café " + LONG])
    assert out == ["café " + LONG, "café " + LONG]
    assert stats.unicode_normalized == 1


def test_whitespace_cleanup():
    text = "\n  " + LONG + "  \r\nsecond line\t \r\r\r\r\nthird\x00 line\x07\n\n\n"
    out, stats = clean([text])
    assert out == [LONG + "\nsecond line\n\nthird line"]
    assert stats.whitespace_cleaned == 1


def test_short_lines_and_documents_are_dropped_and_counted():
    out, stats = clean([LONG + "\nx\n\n" + LONG, "tiny doc", "   ", "."])
    assert out == [LONG + "\n\n" + LONG]
    assert stats.short_lines_dropped == 2  # "x" and "."
    assert stats.dropped == {"too_short": 1, "empty": 2}


def test_thresholds_are_options():
    out, _ = clean(["ab\nx", "1234"], min_line_chars=1, min_doc_chars=4)
    assert out == ["ab\nx", "1234"]


def test_switches_off():
    raw = "cafe\u0301  \r\nx"
    out, stats = clean([raw], normalize=False, filter=False)
    assert out == [raw]
    assert stats.unicode_normalized == stats.whitespace_cleaned == stats.short_lines_dropped == 0
    out, _ = clean(["   "], normalize=False, filter=False)
    assert out == []  # an empty document is never kept: it would be a lone EOS


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_thresholds(bad):
    with pytest.raises(ConfigError, match="min_line_chars must be an integer >= 0"):
        CleanOptions(min_line_chars=bad)
