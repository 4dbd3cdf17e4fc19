"""pipe_clustered.clean_ampsmathematica on a small amps.tar.gz, read without extracting."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe_clustered.clean_ampsmathematica import CLEANER

from .upstream import read_outputs, row, write_tar_gz

MEMBERS = [
    ("amps/khan/algebra/1.json", b'{"problem": "khan", "hints": []}'),
    (
        "amps/mathematica/algebra/polynomial_roots/1.txt",
        b"Problem:\nFind x: x^2 = 4\nAnswer:\n$x = \\pm 2$\n",
    ),
    (
        "amps/mathematica/calculus/derivatives_w_steps/1.txt",
        b"Problem: d/dx x^2\nAnswer: Step 1 ...\n2x\nAnswer: again",
    ),
    ("amps/mathematica/algebra/polynomial_roots/2.txt", b"  Solve 2x = 6 Answer: 3  "),
    ("amps/mathematica/algebra/polynomial_roots/3.txt", b"Problem: no answer marker here"),
    ("amps/mathematica/algebra/polynomial_roots/4.txt", b"Problem:   \nAnswer: 5"),
    ("amps/mathematica/algebra/polynomial_roots/5.txt", b"Problem: x\nAnswer:   "),
    ("amps/mathematica/algebra/polynomial_roots/6.txt", b"Problem: caf\xe9\nAnswer: 1"),
    ("amps/other/algebra/polynomial_roots/7.txt", b"Problem: q\nAnswer: a"),
    ("topic/subtask/8.txt", b"Problem: short path\nAnswer: ok"),
    ("amps/mathematica/algebra/polynomial_roots/notes.md", b"not a txt member"),
]
EXPECTED = {
    "algebra_polynomial_roots.parquet": [
        row("noisy,direct", "Find x: x^2 = 4", "$x = \\pm 2$"),
        row("noisy,direct", "Solve 2x = 6", "3"),
    ],
    # The folder pair above the file names the output, unsanitised; "w_steps" means CoT.
    "calculus_derivatives_w_steps.parquet": [
        row("noisy,cot", "d/dx x^2", "Step 1 ...\n2x\nAnswer: again"),
    ],
    # A 3-component path passes the path rule (cleaners.md §3.18).
    "topic_subtask.parquet": [
        row("noisy,direct", "short path", "ok"),
    ],
}


def test_rows_per_folder_pair(tmp_path: Path) -> None:
    archive = write_tar_gz(tmp_path / "amps.tar.gz", MEMBERS)
    report = CLEANER.run(archive, tmp_path / "out", progress=False)
    assert read_outputs(report) == EXPECTED
    assert report.records == 9  # the .txt members
    assert dict(report.drops) == {
        "no 'Answer:'": 1,
        "empty problem or answer": 2,
        "not UTF-8": 1,
        "not under mathematica/<topic>/<subtask>/": 1,
    }
    assert sum(report.drops.values()) + report.rows_written == report.records


def test_archive_is_not_extracted(tmp_path: Path) -> None:
    archive = write_tar_gz(tmp_path / "raw" / "amps.tar.gz", MEMBERS)
    CLEANER.run(archive, tmp_path / "out", progress=False)
    assert [p.name for p in (tmp_path / "raw").iterdir()] == ["amps.tar.gz"]


def test_damaged_archive_is_an_error(tmp_path: Path) -> None:
    archive = write_tar_gz(tmp_path / "amps.tar.gz", MEMBERS)
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"amps\.tar\.gz: not a readable tar archive, or damaged"):
        CLEANER.run(archive, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_missing_archive_says_where_to_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        InputError,
        match=r"(?s)raw input not found: raw_data/amps\.tar\.gz\n.*AMPS.* to raw_data/amps\.tar\.gz",
    ):
        CLEANER.run(progress=False)
