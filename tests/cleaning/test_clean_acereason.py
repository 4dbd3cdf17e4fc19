"""pipe_clustered.clean_acereason on a local copy in the `hf download nvidia/AceReason-1.1-SFT` layout."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipe_clustered.clean_acereason import CLEANER

from .upstream import read_parquet, row, run_expecting_error, with_batch_rows, write_hub_copy


def _item(category: str | None, question: str | None, output: str | None) -> dict:
    return {"category": category, "source": "s", "input": question, "output": output}


TRAIN = [
    _item("math", "What is 2+2?", "<think>\n2+2 is 4.\n</think>\n\nThe answer is $4$."),
    # Not math: dropped before the assertion, so two <think> do not matter.
    _item("code", "Write code.", "<think>a</think><think>b</think>print(1)"),
    # Shortest match; text around the span kept; not stripped.
    _item("math", "  Ünï  ", "Before <think>x</think> after </think> end\n"),
    _item(None, "no category", "<think>t</think>x"),
    _item("math", "null output", None),
    # Unclosed: the trace would become the answer.
    _item("math", "unclosed", "<think>thinking forever"),
    # Nothing left but whitespace.
    _item("math", "empty", "<think>all thought</think>\n \n"),
    _item("science", "Why?", "<think>t</think>Because."),
    _item("math", "Last", "<think>\n\n</think>Done"),
]
EXPECTED = [
    row("synth,cot", "What is 2+2?", "\n\nThe answer is $4$."),
    row("synth,cot", "  Ünï  ", "Before  after </think> end\n"),
    row("synth,cot", "Last", "Done"),
]


def _independent(items: list[dict]) -> list[dict]:
    """cleaners.md §3.17 re-derived with Python's re, plus the two answer checks."""
    rows = []
    for item in items:
        if item["category"] != "math" or item["output"] is None:
            continue
        response = re.sub(r"<think>.*?</think>", "", item["output"], flags=re.DOTALL)
        if "<think>" in response or not response.strip():
            continue
        rows.append(row("synth,cot", item["input"], response))
    return rows


def test_rows(tmp_path: Path) -> None:
    source = write_hub_copy(tmp_path / "AceReason", {("default", "train"): TRAIN})
    out = tmp_path / "acereason" / "all.parquet"
    report = CLEANER.run(source, out, progress=False)
    assert read_parquet(out) == EXPECTED == _independent(TRAIN)
    assert [(f.name, str(f.type)) for f in pq.read_schema(out)] == [
        ("condition", "string"),
        ("instruction", "string"),
        ("response", "string"),
    ]
    assert report.records == 9 and report.rows_written == 3
    assert dict(report.drops) == {
        "category is not math": 3,
        "null field": 1,
        "unclosed <think>": 1,
        "empty answer after removing <think>": 1,
    }


def test_batch_size_does_not_change_the_output(tmp_path: Path) -> None:
    source = write_hub_copy(tmp_path / "AceReason", {("default", "train"): TRAIN})
    report = with_batch_rows(CLEANER, 1).run(source, tmp_path / "all.parquet", progress=False)
    assert read_parquet(tmp_path / "all.parquet") == EXPECTED
    assert report.records == 9 and sum(report.drops.values()) == 6


@pytest.mark.parametrize(
    ("output", "times"), [("no thinking at all", 0), ("<think>a</think><think>b</think>c", 2)]
)
def test_assertion_names_the_row(tmp_path: Path, output: str, times: int) -> None:
    items = [*TRAIN, _item("math", "bad", output)]
    source = write_hub_copy(tmp_path / "AceReason", {("default", "train"): items})
    # Batches of 4 rows: the bad row is row 9, the second row of the third batch.
    run_expecting_error(
        with_batch_rows(CLEANER, 4),
        source,
        tmp_path / "all.parquet",
        "assertion failed",
        f"default/train row 9: output contains '<think>' {times} times, expected exactly 1",
    )


def test_missing_column_is_named(tmp_path: Path) -> None:
    items = [{"category": "math", "input": "q", "answer": "<think></think>a"}]
    source = write_hub_copy(tmp_path / "AceReason", {("default", "train"): items})
    run_expecting_error(CLEANER, source, tmp_path / "all.parquet", "column(s) ['output'] missing")
