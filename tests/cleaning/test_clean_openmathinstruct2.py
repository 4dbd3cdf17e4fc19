"""pipe_clustered.clean_openmathinstruct2 on a local copy in the `hf download` layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipe_clustered.clean_openmathinstruct2 import CLEANER

from .upstream import (
    assert_offline_run_names_hub_download,
    read_outputs,
    read_parquet,
    row,
    run_expecting_error,
    run_module_offline,
    with_batch_rows,
    write_hub_copy,
)

MODULE = "pipe_clustered.clean_openmathinstruct2"


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
        row("synth,cot", "What is $1+1$?", "We add: $1+1=\\boxed{2}$."),
        row("synth,cot", "Tom has 3 apples…", "3 + 2 = 5.\n\\boxed{5}"),
        # As-is: nothing is stripped.
        row("synth,cot", "Let $x^2=9$, $x>0$. Find $x$. ", " $x=3$, so \\boxed{3}. "),
        row("synth,cot", "Sara has 4 pens…", "4 * 2 = 8."),
        row("synth,cot", "No source?", "Because."),
        row("synth,cot", "Null answer?", "Solved."),
    ],
    "direct.parquet": [
        row("synth,direct", "Let $x^2=9$, $x>0$. Find $x$. ", " 3 "),
        row("synth,direct", "Sara has 4 pens…", "8"),
        row("synth,direct", "No source?", "7"),
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
    for item in train:
        if item["problem"] is None or item["generated_solution"] is None:
            continue
        cot.append(row("synth,cot", item["problem"], item["generated_solution"]))
        if item["problem_source"] not in ["math", "gsm8k"] and item["expected_answer"] is not None:
            direct.append(row("synth,direct", item["problem"], item["expected_answer"]))
    return {"cot.parquet": cot, "direct.parquet": direct}


@pytest.mark.parametrize("batch_rows", [16_384, 1, 3])
def test_cot_and_direct_rows(tmp_path: Path, batch_rows: int) -> None:
    source = _copy(tmp_path / "OpenMathInstruct-2", TRAIN)
    report = with_batch_rows(CLEANER, batch_rows).run(source, tmp_path / "out", progress=False)
    written = read_outputs(report)
    assert written == EXPECTED
    assert written == _independent(TRAIN)
    assert report.records == 8
    assert dict(report.drops) == DROPS


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    rows = [{"problem": "p", "generated_solution": "s", "expected_answer": "1"}]
    source = write_hub_copy(tmp_path / "OpenMathInstruct-2", {("default", "train"): rows})
    run_expecting_error(
        CLEANER, source, tmp_path / "out", "default/train row", "['problem_source'] missing"
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(MODULE, tmp_path, "nvidia/OpenMathInstruct-2")


def test_module_reads_the_default_local_copy(tmp_path: Path) -> None:
    _copy(tmp_path / "raw_data" / "hub" / "nvidia" / "OpenMathInstruct-2", TRAIN)
    done = run_module_offline(MODULE, tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "data_clustered" / "openmathinstruct2"
    assert {path.name: read_parquet(path) for path in out.iterdir()} == EXPECTED
    assert "8 records read, 9 rows written to 2 files" in done.stdout
