"""pipe.clean_platypus.clean_theoremqa on a local copy in the `hf download TIGER-Lab/TheoremQA` layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_platypus.clean_theoremqa import CLEANER

from .upstream import read_jsonl, row, write_hub_copy

PNG = {"bytes": b"\x89PNG\r\n\x1a\nfake", "path": "img.png"}


def _item(question: str | None, answer: object, picture: dict | None = None) -> dict:
    return {
        "Question": question,
        "Answer": answer,
        "Answer_type": "float",
        "Picture": picture,
    }


TEST = [
    _item("How many bits in a byte?", "8"),
    _item("What is shown in the figure?", "3", PNG),
    # Kept as-is: no stripping, list and boolean answers stay text.
    _item("  Compute ∫x dx from 0 to 1.\n", " 0.5 "),
    _item("List them.", "[1, 2, 3]"),
    _item("True?", "True"),
    _item(None, "1"),
    _item("Null answer", None),
]
EXPECTED = [
    row("direct", "How many bits in a byte?", "8"),
    row("direct", "  Compute ∫x dx from 0 to 1.\n", " 0.5 "),
    row("direct", "List them.", "[1, 2, 3]"),
    row("direct", "True?", "True"),
]


def test_rows(tmp_path: Path) -> None:
    source = write_hub_copy(tmp_path / "TheoremQA", {("default", "test"): TEST})
    out = tmp_path / "Platypus" / "theoremqa.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED
    # Re-derived: the text-only items with both fields, in order.
    assert [
        row("direct", i["Question"], i["Answer"])
        for i in TEST
        if i["Picture"] is None and i["Question"] is not None and i["Answer"] is not None
    ] == EXPECTED
    assert report.records == 7 and report.rows_written == 4
    assert dict(report.drops) == {"has a picture": 1, "null field": 2}


def test_non_string_answer_is_named(tmp_path: Path) -> None:
    source = write_hub_copy(
        tmp_path / "TheoremQA", {("default", "test"): [_item("q", 1.5), _item("q2", 2.0)]}
    )
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError, match=r"default/test row 0: response is float, not a string"):
        CLEANER.run(source, out, progress=False)
    assert not out.exists()
