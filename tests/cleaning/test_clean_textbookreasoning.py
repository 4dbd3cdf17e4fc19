"""pipe_clustered.clean_textbookreasoning on a local copy in the `hf download` layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipe_clustered.clean_textbookreasoning import CLEANER

from .upstream import read_outputs, row, run_expecting_error, with_batch_rows, write_hub_copy


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
        row("synth,cot", q, a)
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
        row("noisy,direct", q, a)
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
    for item in train:
        if item["question"] is None or item["answer"] is None:
            continue
        cot.append(row("synth,cot", item["question"], item["answer"]))
        lowered = item["question"].lower()
        if "prove" in lowered or "show that" in lowered or item["reference_answer"] is None:
            continue
        direct.append(row("noisy,direct", item["question"], item["reference_answer"]))
    return {"cot.parquet": cot, "direct.parquet": direct}


@pytest.mark.parametrize("batch_rows", [16_384, 1, 5])
def test_cot_and_direct_rows(tmp_path: Path, batch_rows: int) -> None:
    source = write_hub_copy(tmp_path / "TextbookReasoning", {("default", "train"): TRAIN})
    report = with_batch_rows(CLEANER, batch_rows).run(source, tmp_path / "out", progress=False)
    written = read_outputs(report)
    assert written == EXPECTED
    assert written == _independent(TRAIN)
    assert report.records == 12
    assert dict(report.drops) == DROPS


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    rows = [{"question": "q", "answer": "a"}]
    source = write_hub_copy(tmp_path / "TextbookReasoning", {("default", "train"): rows})
    run_expecting_error(
        CLEANER, source, tmp_path / "out", "default/train row", "['reference_answer'] missing"
    )
