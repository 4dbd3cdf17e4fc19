"""Sudoku-Extreme -> ``data_clustered/sudoku_extreme/all.parquet`` (cleaners.md §3.23).

Source: the file ``train.csv`` of the Hub dataset repository ``sapientinc/sudoku-extreme`` (a raw
file, not a ``datasets`` dataset; ``test.csv`` is not used), kept in
``raw_data/hub/sapientinc/sudoku-extreme`` and downloaded there with ``huggingface_hub`` on first
use, or ``--source FOLDER`` holding ``train.csv``. A header row, then four columns taken by
position: source, question, answer, rating; only question and answer are used.

Assertion (§4): question and answer are each exactly 81 characters; otherwise the run fails
naming the row. Instruction: ``Solve the Sudoku\\n\\n`` + the question with every ``.`` replaced by
``0``; response: the answer as-is; condition ``direct``. No filters.

Vectorised: the CSV is parsed by pyarrow in blocks of a few MiB, every column read as text (an
answer such as ``123…`` must stay a string, never become a number).

Quirks, decided:
- kept: only ``train.csv``; the columns taken by position (the header's names are not checked,
  as in the original); the prompt and the ``.`` -> ``0`` mapping, exactly.
- differs: a row with other than four fields is an error naming the file (the original's
  unpacking failed too, with a bare ValueError).
"""

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from data_io.cleaning import Cleaner, LocalFiles, Record, parquet_file, require
from data_io.cleaning.tables import first_true, rows_table
from data_io.errors import InputError

PROMPT = "Solve the Sudoku\n\n"
COLUMNS = ("source", "question", "answer", "rating")
CELLS = 81

# Bytes of CSV parsed at a time (one Arrow batch each).
_BLOCK_BYTES = 8 << 20


def read_csv_batches(path: Path, rel: str) -> Iterator[Record]:
    """``train.csv`` after its header, as Arrow batches of the four positional columns (text)."""
    options = {
        "read_options": pa_csv.ReadOptions(
            column_names=list(COLUMNS), skip_rows=1, block_size=_BLOCK_BYTES
        ),
        # Like Python's csv module: a quoted value may span lines, and "" stays an empty string.
        "parse_options": pa_csv.ParseOptions(newlines_in_values=True),
        "convert_options": pa_csv.ConvertOptions(
            column_types=dict.fromkeys(COLUMNS, pa.string()), strings_can_be_null=False
        ),
    }
    first = 0
    try:
        batches = pa_csv.open_csv(path, **options)
        for batch in batches:
            yield Record(batch, rel, first, str(path), rows=batch.num_rows, unit="row")
            first += batch.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(
            f"{path}: not a CSV of 4 columns (source, question, answer, rating) after data row "
            f"{first}: {exc}; re-download it"
        ) from exc


def _check_lengths(record: Record, column: str) -> None:
    lengths = pc.utf8_length(record.data.column(column))
    bad = pc.not_equal(lengths, CELLS)
    if pc.any(bad).as_py():
        row = first_true(bad)
        require(
            False,
            f"data row {record.index + row}: {column} has {lengths[row].as_py()} characters, "
            f"expected {CELLS}",
        )


def clean(record: Record) -> Iterator[pa.Table]:
    _check_lengths(record, "question")
    _check_lengths(record, "answer")
    batch: pa.RecordBatch = record.data
    puzzle = pc.replace_substring(batch.column("question"), ".", "0")
    yield rows_table(
        "direct", pc.binary_join_element_wise(PROMPT, puzzle, ""), batch.column("answer")
    )


CLEANER = Cleaner(
    name="sudoku",
    source=LocalFiles(
        "raw_data/hub/sapientinc/sudoku-extreme",
        reader=read_csv_batches,
        include=("train.csv",),
        hub_repo="sapientinc/sudoku-extreme",
        how_to_get="hf download sapientinc/sudoku-extreme train.csv --repo-type dataset "
        "--local-dir raw_data/hub/sapientinc/sudoku-extreme",
    ),
    output=parquet_file("data_clustered/sudoku_extreme/all.parquet"),
    clean=clean,
    description="Sudoku-Extreme train.csv: puzzle -> solution (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
