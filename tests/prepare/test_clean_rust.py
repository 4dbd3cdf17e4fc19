"""The Rust cleaner (``_core.prepare_batch``'s) against the Python one (``clean_oracle.clean_batch``,
the oracle): the same kept texts and the same counts, on generated documents full of what each
step handles, for every option, and on every code point."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_io import _core
from data_io.prepare.normalize import CleanOptions, CleanStats
from tests.prepare.clean_oracle import clean_batch

# What the steps act on: line ends, controls, trailing spaces, Python-only whitespace, marks.
PIECES = [
    "word",
    "Wort",
    " ",
    "  ",
    "\t",
    "\n",
    "\n\n\n",
    "\r\n",
    "\r",
    "\x00",
    "\x07",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\x7f",
    "\x85",
    "\x9f",
    "\xa0",
    "\u3000",
    "\u2028",
    "\u2003",
    "e\u0301",
    "\u00e9",
    "\u1e9b\u0323",
    "\u212b",
    "\uac00",
    "\u1100\u1161",
    "日本",
    "🙂",
    "x",
    "ab",
    ".",
    "é",
    "\u0301",
]
OPTIONS = [
    CleanOptions(),
    CleanOptions(normalize=False),
    CleanOptions(filter=False),
    CleanOptions(normalize=False, filter=False),
    CleanOptions(min_line_chars=0, min_doc_chars=0),
    CleanOptions(min_line_chars=1, min_doc_chars=5),
    CleanOptions(min_line_chars=3, min_doc_chars=1),
    CleanOptions(min_line_chars=7, min_doc_chars=40),
]


def rust_clean(texts: list[str], options: CleanOptions) -> tuple[list[str], dict[str, object]]:
    """The texts through prepare's Rust path (``prepare_batch``, given whole, not encoded)."""
    documents = _core.RawDocuments()
    documents.begin_source("texts", "texts", False)
    documents.feed_texts(texts, 0)
    documents.end_source()
    _, kept, _, counts, _, _ = _core.prepare_batch(
        documents.take(),
        text_field="text",
        fail_invalid=False,
        normalize=options.normalize,
        filter=options.filter,
        min_line_chars=options.min_line_chars,
        min_doc_chars=options.min_doc_chars,
        resolve=_no_rows,
    )
    assert kept is not None
    stats = {
        "unicode_normalized": counts["unicode_normalized"],
        "whitespace_cleaned": counts["whitespace_cleaned"],
        "controls_removed": counts["controls_removed"],
        "short_lines_dropped": counts["short_lines_dropped"],
        "dropped": {"too_short": counts["too_short"], "empty": counts["empty"]},
    }
    return kept, stats


def _no_rows(line: str, source: int, number: int) -> str:
    raise AssertionError("texts given whole have no JSONL rows")


def python_clean(texts: list[str], options: CleanOptions) -> tuple[list[str], dict[str, object]]:
    stats = CleanStats()
    kept = clean_batch(texts, options, stats)
    return kept, stats.as_dict()


documents = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(documents, min_size=1, max_size=20), which=st.integers(0, len(OPTIONS) - 1))
def test_generated_documents_clean_as_in_python(texts: list[str], which: int) -> None:
    options = OPTIONS[which]
    assert rust_clean(texts, options) == python_clean(texts, options)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(max_size=60), min_size=1, max_size=10))
def test_any_text_cleans_as_in_python(texts: list[str]) -> None:
    texts = [t for t in texts if _same_nfc(t)]
    for options in OPTIONS[:3]:
        assert rust_clean(texts, options) == python_clean(texts, options)


def test_every_code_point() -> None:
    """Each code point alone, after a letter and before a combining mark, in every option."""
    texts = []
    for start in range(0, sys.maxunicode + 1, 512):
        chars = [chr(c) for c in range(start, min(start + 512, sys.maxunicode + 1))
                 if not 0xD800 <= c <= 0xDFFF]  # fmt: skip
        texts.append("".join(f"a{c}\u0301 b{c}\n" for c in chars))
    disagree = [t for t in texts if not _same_nfc(t)]
    texts = [t for t in texts if _same_nfc(t)]
    assert len(disagree) < 40, "NFC versions differ on more than a few blocks"
    for options in (OPTIONS[0], OPTIONS[1]):
        assert rust_clean(texts, options) == python_clean(texts, options)


def _same_nfc(text: str) -> bool:
    """Whether the normalisation alone agrees on ``text``: this Python's ``unicodedata`` and the
    crate follow different Unicode versions, and characters added since one of them can
    compose differently."""
    ours = rust_clean([text], CleanOptions(filter=False))[0]
    theirs = clean_batch([text], CleanOptions(filter=False), CleanStats())
    return ours == theirs


@pytest.mark.parametrize("threads", ["1", "2"])
def test_thread_counts_give_the_same_result(threads: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAYON_NUM_THREADS", threads)
    texts = [f"document {i}:\r\n  line\t \n\n\n\nx\nend {i} é\u0301" for i in range(3000)]
    assert rust_clean(texts, OPTIONS[0]) == python_clean(texts, OPTIONS[0])
