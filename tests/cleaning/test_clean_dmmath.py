"""pipe_clustered.clean_dmmath on a small tree in the mathematics_dataset-v1.0 layout."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipe_clustered.clean_dmmath as dmmath
from data_io.errors import InputError
from pipe_clustered.clean_dmmath import CLEANER

from .upstream import read_outputs, row, run_expecting_error

SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ")

# Files as bytes: line endings and surrounding whitespace matter.
FILES = {
    "train-easy/algebra__linear_1d.txt": b"Solve 2*x = 4 for x.\n2\nSolve -3*y + 9 = 0 for y.\n3\n",
    "train-easy/arithmetic__add_or_sub.txt": b"  What is 1 + 2?  \r\n 3\r\nWhat is 5 - 7?\r\n-2",
    "train-medium/algebra__linear_1d.txt": b"Solve 0 = 5*k - 10.\n2\n",
    "train-hard/numbers__base+conv (v2).txt": "Écrire 10 en base 2.\n1010\n".encode(),
    "train-hard/empty.txt": b"",
    # Not read: test splits, files that are not .txt, nested folders.
    "interpolate/algebra__linear_1d.txt": b"Q\nA\n",
    "extrapolate/arithmetic__add_or_sub_big.txt": b"Q\nA\n",
    "train-easy/README.md": b"not a module\n",
    "train-easy/nested/x.txt": b"Q\nA\n",
}

EXPECTED = {
    "train-easy__algebra__linear_1d.parquet": [
        row("direct", "Solve 2*x = 4 for x.", "2"),
        row("direct", "Solve -3*y + 9 = 0 for y.", "3"),
    ],
    "train-easy__arithmetic__add_or_sub.parquet": [
        row("direct", "What is 1 + 2?", "3"),
        row("direct", "What is 5 - 7?", "-2"),
    ],
    "train-medium__algebra__linear_1d.parquet": [
        row("direct", "Solve 0 = 5*k - 10.", "2"),
    ],
    # The name is sanitised: "+", "(" and ")" become "_", the space stays.
    "train-hard__numbers__base_conv _v2_.parquet": [
        row("direct", "Écrire 10 en base 2.", "1010"),
    ],
}


def _raw(root: Path, files: dict[str, bytes] = FILES) -> Path:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _independent(root: Path) -> dict[str, list[dict]]:
    """The expected output re-derived with plain Python from cleaners.md §3.19."""
    expected: dict[str, list[dict]] = {}
    for split in ("train-easy", "train-medium", "train-hard"):
        for path in sorted((root / split).glob("*.txt")):
            with path.open(encoding="utf-8") as handle:
                lines = [line.strip() for line in handle.readlines()]
            assert len(lines) % 2 == 0
            name = "".join(c if c in SAFE else "_" for c in f"{split}__{path.stem}")
            for question, answer in zip(lines[0::2], lines[1::2], strict=True):
                expected.setdefault(f"{name}.parquet", []).append(row("direct", question, answer))
    return expected


def test_rows_per_split_and_module(tmp_path: Path) -> None:
    source = _raw(tmp_path / "mathematics_dataset-v1.0")
    report = CLEANER.run(source, tmp_path / "out", progress=False)
    written = read_outputs(report)
    assert written == EXPECTED
    assert written == _independent(source)
    assert (report.records, report.rows_written, dict(report.drops)) == (6, 6, {})


def test_chunking_does_not_change_pairs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # One line per chunk: every pair straddles two reads.
    monkeypatch.setattr(dmmath, "_CHUNK_BYTES", 1)
    source = _raw(tmp_path / "mathematics_dataset-v1.0")
    report = CLEANER.run(source, tmp_path / "out", progress=False)
    assert read_outputs(report) == EXPECTED


def test_odd_line_count_names_the_file_and_line(tmp_path: Path) -> None:
    files = {**FILES, "train-medium/calculus__differentiate.txt": b"d/dx x^2?\n2*x\nd/dx 3*x?\n"}
    source = _raw(tmp_path / "mathematics_dataset-v1.0", files)
    run_expecting_error(
        CLEANER,
        source,
        tmp_path / "out",
        "assertion failed",
        "train-medium/calculus__differentiate.txt pair 1",
        "odd number of lines (3): line 3 is a question without an answer line",
    )


def test_a_trailing_blank_line_is_a_line(tmp_path: Path) -> None:
    # "Q\nA\n\n" has three lines, as readlines() sees it: the assertion catches it.
    files = {**FILES, "train-easy/algebra__linear_1d.txt": b"Q\nA\n\n"}
    source = _raw(tmp_path / "mathematics_dataset-v1.0", files)
    with pytest.raises(InputError, match=r"odd number of lines \(3\)"):
        CLEANER.run(source, tmp_path / "out", progress=False)


def test_not_utf8_names_the_file(tmp_path: Path) -> None:
    files = {**FILES, "train-easy/algebra__linear_1d.txt": b"Q\nA\ncaf\xe9?\nB\n"}
    source = _raw(tmp_path / "mathematics_dataset-v1.0", files)
    with pytest.raises(InputError, match=r"algebra__linear_1d\.txt: not valid UTF-8"):
        CLEANER.run(source, tmp_path / "out", progress=False)


def test_missing_split_folder_is_an_error(tmp_path: Path) -> None:
    files = {k: v for k, v in FILES.items() if not k.startswith("train-hard/")}
    source = _raw(tmp_path / "mathematics_dataset-v1.0", files)
    with pytest.raises(InputError, match=r"split folder\(s\) \['train-hard'\] missing"):
        CLEANER.run(source, tmp_path / "out", progress=False)


def test_missing_folder_says_what_to_download(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"mathematics_dataset-v1\.0\.tar\.gz"):
        CLEANER.run(tmp_path / "absent", tmp_path / "out", progress=False)
