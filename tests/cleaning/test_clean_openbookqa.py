"""pipe.clean_platypus.clean_openbookqa on a local copy in the `hf download allenai/openbookqa` layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_platypus.clean_openbookqa import CLEANER

from .upstream import jsonl_bytes, read_jsonl, row, run_expecting_error, write_hub_copy


def _item(stem: str, texts: list[str], key: str, fact: str | None, **extra: object) -> dict:
    labels = [chr(ord("A") + i) for i in range(len(texts))]
    return {
        "id": f"id-{stem[:5]}",
        "question_stem": stem,
        "choices": {"text": texts, "label": labels},
        "answerKey": key,
        "fact1": fact,
        "humanScore": 1.0,
        "clarity": 2.0,
        "turkIdAnonymized": "x",
        **extra,
    }


TRAIN = [
    _item("The sun is", ["hot", "cold", "blue", "small"], "A", "the sun is a star"),
    # Whitespace is kept everywhere; non-ASCII text passes through.
    _item("  Wåter boils at\n", [" 100 °C", "0 °C ", "", "50"], "A", " water boils at 100 °C "),
    _item("No fact", ["x", "y", "z", "w"], "C", None),
]
VALIDATION = [_item("Three options only", ["a", "b", "c"], "B", "f")]

PREAMBLE = (
    "Based on the given fact, which of the following option is the correct answer to the question?"
)
EXPECTED = [
    row(
        "direct",
        f"{PREAMBLE}\n\nThe sun is \nA: hot\nB: cold\nC: blue\nD: small\n\nFact: the sun is a star",
        "A",
    ),
    row(
        "direct",
        f"{PREAMBLE}\n\n  Wåter boils at\n \nA:  100 °C\nB: 0 °C \nC: \nD: 50"
        "\n\nFact:  water boils at 100 °C ",
        "A",
    ),
    row("direct", f"{PREAMBLE}\n\nThree options only \nA: a\nB: b\nC: c\n\nFact: f", "B"),
]


def _copy(root: Path, train: list[dict], validation: list[dict] = VALIDATION) -> Path:
    # The test split and the `main` config exist upstream and must not be read.
    unused = [_item("unused", ["a", "b", "c", "d"], "D", "unused")]
    return write_hub_copy(
        root,
        {
            ("additional", "train"): train,
            ("additional", "validation"): validation,
            ("additional", "test"): unused,
            ("main", "train"): [
                {k: v for k, v in unused[0].items() if k != "fact1"},
            ],
        },
    )


def _independent(items: list[dict]) -> list[dict]:
    """The rows re-derived from cleaners.md §3.11 with plain string concatenation."""
    rows = []
    for item in items:
        if item["fact1"] is None:
            continue
        text = PREAMBLE + "\n\n" + item["question_stem"] + " "
        for position, choice in enumerate(item["choices"]["text"]):
            text += "\n" + "ABCDEFGH"[position] + ": " + choice
        text += "\n\nFact: " + item["fact1"]
        rows.append(row("direct", text, item["answerKey"]))
    return rows


def test_rows_and_bytes(tmp_path: Path) -> None:
    source = _copy(tmp_path / "openbookqa", TRAIN)
    out = tmp_path / "Platypus" / "openbookqa.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent([*TRAIN, *VALIDATION])
    assert out.read_bytes() == jsonl_bytes(EXPECTED)
    assert (report.records, report.rows_written, dict(report.drops)) == (4, 3, {"null field": 1})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {
                **_item("q", ["a", "b"], "A", "f"),
                "choices": {"text": ["a", "b"], "label": ["1", "2"]},
            },
            "choices are labelled ['1', '2'], expected ['A', 'B']",
        ),
        (_item("q", ["a", "b"], "E", "f"), "answerKey 'E' is not one of the options ['A', 'B']"),
    ],
)
def test_inconsistent_rows_are_named(tmp_path: Path, bad: dict, message: str) -> None:
    source = _copy(tmp_path / "openbookqa", TRAIN, [*VALIDATION, bad])
    run_expecting_error(
        CLEANER, source, tmp_path / "openbookqa.jsonl", "additional/validation row 1", message
    )


def test_non_string_field_is_named(tmp_path: Path) -> None:
    # `datasets` casts every split to one schema, so the stem is numeric in both splits.
    bad = _item("q", ["a", "b"], "A", "f", question_stem=7)
    source = _copy(tmp_path / "openbookqa", [bad], [bad])
    with pytest.raises(InputError, match=r"train row 0: question_stem is int, not a string"):
        CLEANER.run(source, tmp_path / "out.jsonl", progress=False)


def test_missing_copy_says_what_to_download(tmp_path: Path) -> None:
    run_expecting_error(
        CLEANER, tmp_path / "nowhere", tmp_path / "out.jsonl", "--source", "allenai/openbookqa"
    )
