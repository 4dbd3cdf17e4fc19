"""pipe.clean_platypus.clean_reclor on a local copy in the `hf download metaeval/reclor` layout
(``train.json`` and ``val.json``, each a JSON array; ``datasets`` maps ``val`` to validation)."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_platypus.clean_reclor import CLEANER

from .upstream import read_jsonl, row, run_expecting_error, write_json


def _item(context: str | None, question: str, answers: list[str], label: int) -> dict:
    return {
        "context": context,
        "question": question,
        "answers": answers,
        "label": label,
        "id_string": f"train_{len(question)}",
    }


TRAIN = [
    _item("All birds fly.", "Which is assumed?", ["a", "b", "c", "d"], 2),
    # Nothing stripped; non-ASCII kept.
    _item(" Ça va.\n", "  Which?  ", [" x ", "y\n", "", "zé"], 0),
    _item(None, "Dropped: no passage", ["a", "b", "c", "d"], 1),
]
VALIDATION = [_item("P", "Q", ["a", "b", "c", "d"], 3)]
EXPECTED = [
    row("direct", "Which is assumed?\n\nAll birds fly.\n\nOptions:\nA: a\nB: b\nC: c\nD: d", "C"),
    row("direct", "  Which?  \n\n Ça va.\n\n\nOptions:\nA:  x \nB: y\n\nC: \nD: zé", "A"),
    row("direct", "Q\n\nP\n\nOptions:\nA: a\nB: b\nC: c\nD: d", "D"),
]


def _copy(root: Path, train: list[dict], validation: list[dict] = VALIDATION) -> Path:
    write_json(root / "train.json", train)
    write_json(root / "val.json", validation)
    (root / "README.md").write_text("---\nlicense: other\n---\nReClor, a stand-in.\n")
    return root


def _independent(items: list[dict]) -> list[dict]:
    """cleaners.md §3.12 re-derived with plain concatenation."""
    rows = []
    for item in items:
        if item["context"] is None:
            continue
        text = item["question"] + "\n\n" + item["context"] + "\n\nOptions:"
        for i, answer in enumerate(item["answers"]):
            text += "\n" + "ABCD"[i] + ": " + answer
        rows.append(row("direct", text, "ABCD"[item["label"]]))
    return rows


def test_rows(tmp_path: Path) -> None:
    source = _copy(tmp_path / "reclor", TRAIN)
    out = tmp_path / "Platypus" / "reclor.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent([*TRAIN, *VALIDATION])
    assert (report.records, report.rows_written, dict(report.drops)) == (4, 3, {"null field": 1})


@pytest.mark.parametrize("label", [4, -1])
def test_label_out_of_range_is_named(tmp_path: Path, label: int) -> None:
    source = _copy(
        tmp_path / "reclor", TRAIN, [*VALIDATION, _item("P", "Q", ["a", "b", "c", "d"], label)]
    )
    run_expecting_error(
        CLEANER,
        source,
        tmp_path / "reclor.jsonl",
        "assertion failed",
        "default/validation row 1",
        f"label {label} is not the index of one of the 4 answers",
    )


def test_missing_copy_says_what_to_download(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="metaeval/reclor"):
        CLEANER.run(tmp_path / "nowhere", tmp_path / "out.jsonl", progress=False)
