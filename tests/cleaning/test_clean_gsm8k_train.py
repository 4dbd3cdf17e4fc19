"""pipe.clean_gsm8k_train on a local copy in the `hf download openai/gsm8k` layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipe.clean_gsm8k_train import CLEANER

from .upstream import (
    assert_offline_run_names_hub_download,
    jsonl_bytes,
    read_jsonl,
    row,
    run_expecting_error,
    run_module_offline,
    write_hub_copy,
)

MODULE = "pipe.clean_gsm8k_train"

TRAIN = [
    {
        "question": "  Ava has 3 boxes of 4 pens. How many pens?\n",
        "answer": "3 boxes * 4 pens = <<3*4=12>>12 pens.\n#### 12",
    },
    {"question": "Ünïcode – café: 2 + 2?", "answer": "It is 4.\n####  4 \n"},
    {"question": "Negative?", "answer": "#### -7"},
]
EXPECTED = [
    row("direct", "Ava has 3 boxes of 4 pens. How many pens?", "12"),
    row("direct", "Ünïcode – café: 2 + 2?", "4"),
    row("direct", "Negative?", "-7"),
]


def _copy(root: Path, train: list[dict]) -> Path:
    # The test split exists upstream and must not be read.
    return write_hub_copy(
        root,
        {("main", "train"): train, ("main", "test"): [{"question": "unused", "answer": "#### 0"}]},
    )


def test_rows_and_bytes(tmp_path: Path) -> None:
    source = _copy(tmp_path / "gsm8k", TRAIN)
    out = tmp_path / "out" / "gsm8k_train.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert out.read_bytes() == jsonl_bytes(EXPECTED)
    assert (report.records, report.rows_written, dict(report.drops)) == (3, 3, {})
    assert report.files == [(out, 3)]


@pytest.mark.parametrize(
    ("answer", "parts"),
    [("no delimiter at all", 1), ("#### 1 #### 2", 3)],
)
def test_assertion_names_the_row(tmp_path: Path, answer: str, parts: int) -> None:
    source = _copy(tmp_path / "gsm8k", [*TRAIN, {"question": "q", "answer": answer}])
    run_expecting_error(
        CLEANER,
        source,
        tmp_path / "out.jsonl",
        "assertion failed",
        "main/train row 3",
        f"into {parts} parts, expected 2",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(MODULE, tmp_path, "openai/gsm8k")


def test_module_reads_the_default_local_copy(tmp_path: Path) -> None:
    _copy(tmp_path / "raw_data" / "hub" / "openai" / "gsm8k", TRAIN)
    done = run_module_offline(MODULE, tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_jsonl(tmp_path / "data" / "gsm8k_train.jsonl") == EXPECTED
    assert "3 records read, 3 rows written" in done.stdout


def test_module_source_that_does_not_exist(tmp_path: Path) -> None:
    done = run_module_offline(MODULE, tmp_path, "--source", "nowhere", "--out", "x.jsonl")
    assert done.returncode == 1
    assert "--source nowhere does not exist; for openai/gsm8k pass the folder" in done.stderr
    (tmp_path / "a_file").write_text("x")
    done = run_module_offline(MODULE, tmp_path, "--source", "a_file", "--out", "x.jsonl")
    assert done.returncode == 1
    assert "--source a_file is not a folder" in done.stderr


def test_null_field_is_dropped_and_counted_not_a_crash(tmp_path: Path) -> None:
    """The README's promise: a record whose field is null is dropped and counted by field."""
    nulls = [{"question": "Null answer?", "answer": None}, {"question": None, "answer": "#### 1"}]
    source = _copy(tmp_path / "gsm8k", [TRAIN[0], *nulls, TRAIN[1]])
    out = tmp_path / "out" / "gsm8k_train.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert out.read_bytes() == jsonl_bytes(EXPECTED[:2])
    assert report.records == 4 and report.rows_written == 2
    assert dict(report.drops) == {"null field: answer": 1, "null field: question": 1}
