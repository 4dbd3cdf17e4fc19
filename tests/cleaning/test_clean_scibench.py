"""pipe.clean_platypus.clean_scibench on a `git clone mandyyyyii/scibench` layout."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_platypus.clean_scibench import CLEANER

from .upstream import read_jsonl, row, run_expecting_error, write_json

FILES: dict[str, list[dict]] = {
    # Written first but read second: listings are sorted.
    "thermo.json": [
        {"problem_text": "Heat?", "solution": "", "answer_latex": " $5$ ", "answer_number": "5"},
    ],
    "atkins_sol.json": [
        {
            "problem_text": " Molar volume of CO$_2$?\r\n",
            "solution": " Use van der Waals.\r\nSo 0.366. ",
            "answer_latex": " 0.366",
            "answer_number": "0.366",
            "unit": " $\\mathrm{dm}^3$",
        },
        # `$number$` (after stripping both) becomes the bare number.
        {
            "problem_text": "p2",
            "solution": "s2",
            "answer_latex": "$-6.9$",
            "answer_number": " -6.9 ",
        },
        # Not exactly `$number$`: kept as LaTeX.
        {
            "problem_text": "p3",
            "solution": "s3",
            "answer_latex": "$1.0 \\times 10^5$",
            "answer_number": "100000",
        },
        # Empty answer: the original wrote a direct row with an empty response.
        {"problem_text": "p4", "solution": "s4", "answer_latex": "", "answer_number": ""},
    ],
    "atkins.json": [
        # Missing keys count as empty strings; the same problem as in atkins_sol.json is kept.
        {
            "problem_text": " Molar volume of CO$_2$?",
            "answer_latex": "0.366",
            "answer_number": "0.366",
        },
        {"problem_text": "   ", "solution": "orphan", "answer_latex": "1", "answer_number": "1"},
    ],
}
EXPECTED = [
    row("direct", "Molar volume of CO$_2$?", "0.366"),
    row("cot", "Molar volume of CO$_2$?", "Use van der Waals.\r\nSo 0.366."),
    row("direct", "Molar volume of CO$_2$?", "0.366"),
    row("cot", "p2", "s2"),
    row("direct", "p2", "-6.9"),
    row("cot", "p3", "s3"),
    row("direct", "p3", "$1.0 \\times 10^5$"),
    row("cot", "p4", "s4"),
    row("direct", "Heat?", "5"),
]


def _clone(root: Path, files: dict[str, list[dict]] = FILES) -> Path:
    original = root / "dataset" / "original"
    for name, items in files.items():
        write_json(original / name, items)
    # Not read: subfolders, other extensions, other folders of the clone.
    write_json(original / "python" / "atkins.json", [{"problem_text": "no"}])
    (original / "wolfram").mkdir()
    (original / "README.txt").write_text("not read")
    write_json(root / "dataset" / "other.json", [{"problem_text": "no"}])
    return root


def _independent(root: Path) -> list[dict]:
    """cleaners.md §3.13 re-derived: sorted files, strip, `$n$` -> n, cot if solution."""
    rows = []
    for path in sorted((root / "dataset" / "original").glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8")):
            problem = item.get("problem_text", "").strip()
            solution = item.get("solution", "").strip()
            latex = item.get("answer_latex", "").strip()
            number = item.get("answer_number", "").strip()
            answer = number if latex == "$" + number + "$" else latex
            if not problem:
                continue
            if solution:
                rows.append(row("cot", problem, solution))
            if answer:
                rows.append(row("direct", problem, answer))
    return rows


def test_rows(tmp_path: Path) -> None:
    source = _clone(tmp_path / "scibench")
    out = tmp_path / "Platypus" / "scibench.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent(source)
    assert report.records == 7 and report.rows_written == 9
    assert dict(report.drops) == {
        "empty problem": 1,
        "no cot row: empty solution": 2,
        "no direct row: empty answer": 1,
    }


def test_non_string_field_is_named(tmp_path: Path) -> None:
    files = {
        "stat.json": [
            {"problem_text": "p", "solution": "s"},
            {"problem_text": "p", "answer_number": 3.5},
        ]
    }
    run_expecting_error(
        CLEANER,
        _clone(tmp_path / "scibench", files),
        tmp_path / "scibench.jsonl",
        "dataset/original/stat.json item 1",
        "answer_number is float, not a string",
    )


def test_missing_clone_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_expecting_error(
        CLEANER,
        None,
        None,
        "raw_data/Platypus/scibench",
        "git clone https://github.com/mandyyyyii/scibench raw_data/Platypus/scibench",
    )
    (tmp_path / "raw_data" / "Platypus" / "scibench" / "dataset" / "original").mkdir(parents=True)
    with pytest.raises(
        InputError, match=r"files matching \['dataset/original/\*\.json'\] not found"
    ):
        CLEANER.run(progress=False)
    assert not (tmp_path / "data").exists()
