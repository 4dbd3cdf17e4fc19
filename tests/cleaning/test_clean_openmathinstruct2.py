"""pipe_clustered.clean_openmathinstruct2 on a local copy in the `hf download` layout."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe_clustered.clean_openmathinstruct2 import CLEANER

from .upstream import read_parquet, write_hub_copy

REPO_ROOT = Path(__file__).resolve().parents[2]


def _row(problem: str | None, solution: str | None, answer: str | None, source: str | None) -> dict:
    return {
        "problem": problem,
        "generated_solution": solution,
        "expected_answer": answer,
        "problem_source": source,
    }


TRAIN = [
    _row("What is $1+1$?", "We add: $1+1=\\boxed{2}$.", "2", "math"),
    _row("Tom has 3 apples…", "3 + 2 = 5.\n\\boxed{5}", "5", "gsm8k"),
    _row("Let $x^2=9$, $x>0$. Find $x$. ", " $x=3$, so \\boxed{3}. ", " 3 ", "augmented_math"),
    _row("Sara has 4 pens…", "4 * 2 = 8.", "8", "augmented_gsm8k"),
    _row("No source?", "Because.", "7", None),
    _row("Null answer?", "Solved.", None, "augmented_math"),
    _row(None, "orphan solution", "1", "augmented_math"),
    _row("orphan problem", None, "1", "math"),
]

EXPECTED = {
    "cot.parquet": [
        {
            "condition": "synth,cot",
            "instruction": "What is $1+1$?",
            "response": "We add: $1+1=\\boxed{2}$.",
        },
        {
            "condition": "synth,cot",
            "instruction": "Tom has 3 apples…",
            "response": "3 + 2 = 5.\n\\boxed{5}",
        },
        # As-is: nothing is stripped.
        {
            "condition": "synth,cot",
            "instruction": "Let $x^2=9$, $x>0$. Find $x$. ",
            "response": " $x=3$, so \\boxed{3}. ",
        },
        {"condition": "synth,cot", "instruction": "Sara has 4 pens…", "response": "4 * 2 = 8."},
        {"condition": "synth,cot", "instruction": "No source?", "response": "Because."},
        {"condition": "synth,cot", "instruction": "Null answer?", "response": "Solved."},
    ],
    "direct.parquet": [
        {
            "condition": "synth,direct",
            "instruction": "Let $x^2=9$, $x>0$. Find $x$. ",
            "response": " 3 ",
        },
        {"condition": "synth,direct", "instruction": "Sara has 4 pens…", "response": "8"},
        {"condition": "synth,direct", "instruction": "No source?", "response": "7"},
    ],
}

DROPS = {
    "null problem or generated_solution": 2,
    "no direct row: problem_source is math or gsm8k": 2,
    "no direct row: null expected_answer": 1,
}


def _copy(root: Path, train: list[dict]) -> Path:
    # The smaller train_1M split exists upstream and must not be read.
    return write_hub_copy(
        root,
        {
            ("default", "train"): train,
            ("default", "train_1M"): [_row("unused", "unused", "0", "augmented_math")],
        },
    )


def _independent(train: list[dict]) -> dict[str, list[dict]]:
    """The expected output re-derived with plain Python from cleaners.md §3.21."""
    cot, direct = [], []
    for row in train:
        if row["problem"] is None or row["generated_solution"] is None:
            continue
        cot.append(("synth,cot", row["problem"], row["generated_solution"]))
        if row["problem_source"] not in ["math", "gsm8k"] and row["expected_answer"] is not None:
            direct.append(("synth,direct", row["problem"], row["expected_answer"]))
    keys = ("condition", "instruction", "response")
    return {
        "cot.parquet": [dict(zip(keys, row, strict=True)) for row in cot],
        "direct.parquet": [dict(zip(keys, row, strict=True)) for row in direct],
    }


@pytest.mark.parametrize("batch_rows", [16_384, 1, 3])
def test_cot_and_direct_rows(tmp_path: Path, batch_rows: int) -> None:
    source = _copy(tmp_path / "OpenMathInstruct-2", TRAIN)
    cleaner = dataclasses.replace(
        CLEANER, source=dataclasses.replace(CLEANER.source, batch_rows=batch_rows)
    )
    report = cleaner.run(source, tmp_path / "out", progress=False)
    written = {path.name: read_parquet(path) for path, _ in report.files}
    assert written == EXPECTED
    assert written == _independent(TRAIN)
    assert report.records == 8
    assert dict(report.drops) == DROPS


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    rows = [{"problem": "p", "generated_solution": "s", "expected_answer": "1"}]
    source = write_hub_copy(tmp_path / "OpenMathInstruct-2", {("default", "train"): rows})
    with pytest.raises(InputError) as caught:
        CLEANER.run(source, tmp_path / "out", progress=False)
    message = str(caught.value)
    assert "default/train row" in message
    assert "['problem_source'] missing" in message


def _module(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipe_clustered.clean_openmathinstruct2", "--quiet"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    done = _module(tmp_path)
    assert done.returncode == 1
    assert (
        "hf download nvidia/OpenMathInstruct-2 --repo-type dataset "
        "--local-dir raw_data/hub/nvidia/OpenMathInstruct-2" in done.stderr
    )
    assert not (tmp_path / "data_clustered").exists()


def test_module_reads_the_default_local_copy(tmp_path: Path) -> None:
    _copy(tmp_path / "raw_data" / "hub" / "nvidia" / "OpenMathInstruct-2", TRAIN)
    done = _module(tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "data_clustered" / "openmathinstruct2"
    assert {path.name: read_parquet(path) for path in out.iterdir()} == EXPECTED
    assert "8 records read, 9 rows written to 2 file(s)" in done.stdout
