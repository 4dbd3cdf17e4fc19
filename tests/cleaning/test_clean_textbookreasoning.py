"""pipe_clustered.clean_textbookreasoning on a local copy in the `hf download` layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe_clustered.clean_textbookreasoning import CLEANER

from .upstream import read_parquet, write_hub_copy


def _row(question: str | None, answer: str | None, reference: str | None) -> dict:
    return {
        "question": question,
        "answer": answer,
        "reference_answer": reference,
        "subject": "physics",
        "reference_url": "https://example.org/book",
    }


TRAIN = [
    _row("What is the SI unit of force?", "The newton (N), since F = ma.", "N"),
    _row("Prove that √2 is irrational.", "Suppose √2 = p/q…", "See proof."),
    _row("Show that the sum of two even numbers is even.", "2a + 2b = 2(a+b).", "even"),
    _row("SHOW THAT x > 0.", "Because.", "x > 0"),
    # A substring match: "improve" contains "prove".
    _row("How can we improve the yield?", "Raise the temperature.", "heat"),
    # Two spaces: not "show that".
    _row("Show  that this differs.", "It does.", "yes"),
    _row("  Kept as-is?  ", "\nLong answer.\n", " 42 "),
    _row("Empty reference?", "Long.", ""),
    _row("İstanbul population?", "About 15 million.", "15 million"),
    _row("Null reference?", "Answer.", None),
    _row(None, "orphan answer", "x"),
    _row("orphan question", None, "x"),
]

EXPECTED = {
    "cot.parquet": [
        {"condition": "synth,cot", "instruction": q, "response": a}
        for q, a in [
            ("What is the SI unit of force?", "The newton (N), since F = ma."),
            ("Prove that √2 is irrational.", "Suppose √2 = p/q…"),
            ("Show that the sum of two even numbers is even.", "2a + 2b = 2(a+b)."),
            ("SHOW THAT x > 0.", "Because."),
            ("How can we improve the yield?", "Raise the temperature."),
            ("Show  that this differs.", "It does."),
            ("  Kept as-is?  ", "\nLong answer.\n"),
            ("Empty reference?", "Long."),
            ("İstanbul population?", "About 15 million."),
            ("Null reference?", "Answer."),
        ]
    ],
    "direct.parquet": [
        {"condition": "noisy,direct", "instruction": q, "response": a}
        for q, a in [
            ("What is the SI unit of force?", "N"),
            ("Show  that this differs.", "yes"),
            ("  Kept as-is?  ", " 42 "),
            ("Empty reference?", ""),
            ("İstanbul population?", "15 million"),
        ]
    ],
}

DROPS = {
    "null question or answer": 2,
    "no direct row: proof question": 4,
    "no direct row: null reference_answer": 1,
}


def _independent(train: list[dict]) -> dict[str, list[dict]]:
    """The expected output re-derived with plain Python (str.lower) from cleaners.md §3.25."""
    cot, direct = [], []
    for row in train:
        if row["question"] is None or row["answer"] is None:
            continue
        cot.append(
            {"condition": "synth,cot", "instruction": row["question"], "response": row["answer"]}
        )
        lowered = row["question"].lower()
        if "prove" in lowered or "show that" in lowered or row["reference_answer"] is None:
            continue
        direct.append(
            {
                "condition": "noisy,direct",
                "instruction": row["question"],
                "response": row["reference_answer"],
            }
        )
    return {"cot.parquet": cot, "direct.parquet": direct}


@pytest.mark.parametrize("batch_rows", [16_384, 1, 5])
def test_cot_and_direct_rows(tmp_path: Path, batch_rows: int) -> None:
    source = write_hub_copy(tmp_path / "TextbookReasoning", {("default", "train"): TRAIN})
    cleaner = dataclasses.replace(
        CLEANER, source=dataclasses.replace(CLEANER.source, batch_rows=batch_rows)
    )
    report = cleaner.run(source, tmp_path / "out", progress=False)
    written = {path.name: read_parquet(path) for path, _ in report.files}
    assert written == EXPECTED
    assert written == _independent(TRAIN)
    assert report.records == 12
    assert dict(report.drops) == DROPS


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    rows = [{"question": "q", "answer": "a"}]
    source = write_hub_copy(tmp_path / "TextbookReasoning", {("default", "train"): rows})
    with pytest.raises(InputError) as caught:
        CLEANER.run(source, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert "default/train row" in message
    assert "['reference_answer'] missing" in message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
