"""pipe_clustered.clean_sudoku on a train.csv in the sapientinc/sudoku-extreme layout."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import pipe_clustered.clean_sudoku as sudoku
from data_io.errors import InputError
from pipe_clustered.clean_sudoku import CLEANER

from .upstream import (
    assert_says_what_to_download,
    read_parquet,
    row,
    run_expecting_error,
    run_module_offline,
)

SOLVED = "534678912672195348198342567859761423426853791713924856961537284287419635345286179"
PUZZLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"
HARD_SOLVED = "812753649943682175675491283154237896369845721287169534521974368438526917796318452"
HARD = "8..........36......7..9.2...5...7.......457.....1...3...1....68..85...1..9....4.."
# A solution that starts with 0-like digits must stay text (as "0…" would as a number).
DIGITS = "0" * 81

ROWS = [
    ("puzzles0_kaggle", PUZZLE, SOLVED, "0"),
    ("puzzles2_17_clue", HARD, HARD_SOLVED, "97"),
    ('odd "source", quoted', DIGITS.replace("0", "."), DIGITS, ""),
]
EXPECTED = [
    row("direct", "Solve the Sudoku\n\n" + PUZZLE.replace(".", "0"), SOLVED),
    row("direct", "Solve the Sudoku\n\n" + HARD.replace(".", "0"), HARD_SOLVED),
    row("direct", "Solve the Sudoku\n\n" + DIGITS, DIGITS),
]


def _csv(
    folder: Path, rows: list[tuple[str, ...]], header: str = "source,question,answer,rating"
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    text = io.StringIO()
    text.write(header + "\n")
    csv.writer(text, lineterminator="\n").writerows(rows)
    (folder / "train.csv").write_text(text.getvalue(), encoding="utf-8")
    # test.csv exists upstream and must not be read.
    (folder / "test.csv").write_text("source,question,answer,rating\nx,y,z,0\n", encoding="utf-8")
    return folder


def _independent(folder: Path) -> list[dict]:
    """The expected rows re-derived with Python's csv module, from cleaners.md §3.23."""
    with (folder / "train.csv").open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader)
        rows = []
        for _source, question, answer, _rating in reader:
            assert len(question) == 81 and len(answer) == 81
            rows.append(row("direct", "Solve the Sudoku\n\n" + question.replace(".", "0"), answer))
    return rows


@pytest.mark.parametrize("block_bytes", [8 << 20, 300])
def test_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block_bytes: int) -> None:
    monkeypatch.setattr(sudoku, "_BLOCK_BYTES", block_bytes)
    source = _csv(tmp_path / "sudoku-extreme", ROWS)
    out = tmp_path / "out" / "all.parquet"
    report = CLEANER.run(source, out, progress=False)
    assert read_parquet(out) == EXPECTED
    assert read_parquet(out) == _independent(source)
    assert (report.records, report.rows_written, dict(report.drops)) == (3, 3, {})
    assert [str(f.type) for f in pq.read_schema(out)] == ["string"] * 3


def test_columns_are_taken_by_position(tmp_path: Path) -> None:
    source = _csv(tmp_path / "sudoku-extreme", ROWS[:1], header="a,b,c,d")
    out = tmp_path / "all.parquet"
    CLEANER.run(source, out, progress=False)
    assert read_parquet(out) == EXPECTED[:1]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (("s", PUZZLE[:80], SOLVED, "1"), "data row 2: question has 80 characters, expected 81"),
        (("s", PUZZLE, SOLVED + "1", "1"), "data row 2: answer has 82 characters, expected 81"),
    ],
)
def test_assertion_names_the_row(tmp_path: Path, row: tuple[str, ...], message: str) -> None:
    source = _csv(tmp_path / "sudoku-extreme", [*ROWS[:2], row])
    run_expecting_error(
        CLEANER,
        source,
        tmp_path / "out" / "all.parquet",
        "assertion failed",
        "train.csv rows 0-2",
        message,
    )


def test_wrong_field_count_names_the_file(tmp_path: Path) -> None:
    source = _csv(tmp_path / "sudoku-extreme", [*ROWS[:1], ("s", PUZZLE, SOLVED)])
    with pytest.raises(InputError, match=r"train\.csv: not a CSV of 4 columns"):
        CLEANER.run(source, tmp_path / "all.parquet", progress=False)


def test_missing_train_csv(tmp_path: Path) -> None:
    folder = tmp_path / "sudoku-extreme"
    folder.mkdir()
    with pytest.raises(InputError, match=r"required file train\.csv not found"):
        CLEANER.run(folder, tmp_path / "all.parquet", progress=False)


def test_module_offline_without_copy_says_what_to_download(tmp_path: Path) -> None:
    done = run_module_offline("pipe_clustered.clean_sudoku", tmp_path, "--quiet")
    assert_says_what_to_download(
        done,
        "Hub repository sapientinc/sudoku-extreme unreachable",
        "hf download sapientinc/sudoku-extreme train.csv --repo-type dataset",
    )
    assert not (tmp_path / "data_clustered").exists()
    assert not (tmp_path / "raw_data").exists() or not any((tmp_path / "raw_data").rglob("*.csv"))
