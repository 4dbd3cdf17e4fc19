"""The two entry points: `python sample_tokenized.py` and `data_io sample` (stdout = report)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_io.sampling.synthetic import random_task, write_corpus

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    return write_corpus(
        tmp_path / "tok",
        {"flan__cot_a.parquet": random_task(rng, 30), "flan__b.parquet": random_task(rng, 20)},
        vocab_size=300,
    )


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_entry_points_write_only_the_report_to_stdout(
    tmp_path: Path, corpus: Path, entry: list[str]
) -> None:
    out = tmp_path / "out"
    done = _run(*entry, f"tokenized_path={corpus}", f"output_path={out}", "epochs=2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("\n### Category Coverage Stats\n")
    assert "Sampling epochs" not in done.stdout and "Reading indices" in done.stderr
    # The repository's prefix_config.yaml applies: flan__cot_ before flan__, noted once.
    assert done.stderr.count("match 'flan__cot_' and also 'flan__'") == 1
    assert (out / "epoch_1" / "inst_start.npy").exists()
    again = _run(*entry, f"tokenized_path={corpus}", f"output_path={out}", "epochs=2", "-q")
    assert again.returncode == 0
    assert "reusing it" in again.stderr and "Reading indices" not in again.stderr


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_errors_exit_non_zero_with_the_key(tmp_path: Path, corpus: Path, entry: list[str]) -> None:
    done = _run(*entry, f"tokenized_path={corpus}", "epochz=3")
    assert done.returncode == 1
    assert "'epochz'" in done.stderr and done.stdout == ""
    done = _run(*entry, f"tokenized_path={tmp_path / 'missing'}")
    assert done.returncode == 1 and "'tokenized_path'" in done.stderr


def test_help_lists_the_options() -> None:
    done = _run("sample_tokenized.py", "--help")
    assert done.returncode == 0
    for key in ("tokenized_path=", "epochs=10", "short_truncated='drop'", "reuse=True"):
        assert key in done.stdout
