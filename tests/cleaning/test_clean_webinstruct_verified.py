"""pipe.clean_webinstruct_verified on a local copy in the `hf download` layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_webinstruct_verified import CLEANER

from .upstream import read_jsonl, write_hub_copy

REPO_ROOT = Path(__file__).resolve().parents[2]


def _item(question: str | None, answer: str | None, **extra: object) -> dict:
    # The upstream columns, the unused ones included.
    return {
        "id": extra.get("id", "x"),
        "question": question,
        "answer": answer,
        "answer_type": "Float",
        "category": "Physics",
        "difficulty": "Senior High School",
    }


TRAIN = [
    _item("  What is 2 + 2? ", " 4\n"),
    _item("Ünïcode – énergie en J ?", "3.2e-19 J"),
    _item(None, "orphan answer"),
    _item("Question without answer", None),
    _item("", ""),
    _item("Multi\nline", "Line one\nLine two"),
]
# Both fields as-is (not stripped), condition plain "direct"; null items dropped.
EXPECTED = [
    {"condition": "direct", "instruction": "  What is 2 + 2? ", "response": " 4\n"},
    {"condition": "direct", "instruction": "Ünïcode – énergie en J ?", "response": "3.2e-19 J"},
    {"condition": "direct", "instruction": "", "response": ""},
    {"condition": "direct", "instruction": "Multi\nline", "response": "Line one\nLine two"},
]


def _copy(root: Path, train: list[dict]) -> Path:
    # The test split exists upstream and must not be read.
    return write_hub_copy(
        root,
        {("default", "train"): train, ("default", "test"): [_item("unused", "unused")]},
    )


def _independent(train: list[dict]) -> list[dict]:
    """The expected rows re-derived in plain Python from cleaners.md §3.9."""
    return [
        {"condition": "direct", "instruction": item["question"], "response": item["answer"]}
        for item in train
        if item["question"] is not None and item["answer"] is not None
    ]


def test_rows_and_bytes(tmp_path: Path) -> None:
    out = tmp_path / "out" / "webinstruct_verified.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", TRAIN), out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent(TRAIN)
    expected_bytes = "".join(
        json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in EXPECTED
    ).encode("utf-8")
    assert out.read_bytes() == expected_bytes
    assert report.records == 6 and report.rows_written == 4
    assert dict(report.drops) == {"null question or answer": 2}


def test_many_batches_keep_source_order(tmp_path: Path) -> None:
    train = [_item(f"q{i}", f"a{i}") for i in range(20_000)]  # more than one 8192-row batch
    out = tmp_path / "out.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", train), out, progress=False)
    assert read_jsonl(out) == _independent(train)
    assert report.records == 20_000 and not report.drops


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    train = [{"question": "q", "response": "not the upstream name"}]
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as caught:
        CLEANER.run(_copy(tmp_path / "copy", train), out, progress=False)
    message = str(caught.value)
    assert "default/train row 0" in message
    assert "column(s) ['answer'] missing" in message
    assert not out.exists()


def _module(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipe.clean_webinstruct_verified"],
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
        "hf download TIGER-Lab/WebInstruct-verified --repo-type dataset "
        "--local-dir raw_data/hub/TIGER-Lab/WebInstruct-verified"
    ) in done.stderr
    assert not (tmp_path / "data").exists()


def test_module_reads_the_default_local_copy(tmp_path: Path) -> None:
    _copy(tmp_path / "raw_data" / "hub" / "TIGER-Lab" / "WebInstruct-verified", TRAIN)
    done = _module(tmp_path)
    assert done.returncode == 0, done.stderr
    assert read_jsonl(tmp_path / "data" / "webinstruct_verified.jsonl") == EXPECTED
    assert "6 records read, 4 rows written" in done.stdout
    assert "dropped 2: null question or answer" in done.stdout
