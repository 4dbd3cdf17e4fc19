"""pipe.clean_gsm8k_train on a local copy in the `hf download openai/gsm8k` layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_gsm8k_train import CLEANER

from .upstream import write_hub_copy

REPO_ROOT = Path(__file__).resolve().parents[2]

TRAIN = [
    {
        "question": "  Ava has 3 boxes of 4 pens. How many pens?\n",
        "answer": "3 boxes * 4 pens = <<3*4=12>>12 pens.\n#### 12",
    },
    {"question": "Ünïcode – café: 2 + 2?", "answer": "It is 4.\n####  4 \n"},
    {"question": "Negative?", "answer": "#### -7"},
]
EXPECTED = [
    {
        "condition": "direct",
        "instruction": "Ava has 3 boxes of 4 pens. How many pens?",
        "response": "12",
    },
    {"condition": "direct", "instruction": "Ünïcode – café: 2 + 2?", "response": "4"},
    {"condition": "direct", "instruction": "Negative?", "response": "-7"},
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
    expected_bytes = "".join(
        json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n" for row in EXPECTED
    ).encode("utf-8")
    assert out.read_bytes() == expected_bytes
    assert (report.records, report.rows_written, dict(report.drops)) == (3, 3, {})
    assert report.files == [(out, 3)]


@pytest.mark.parametrize(
    ("answer", "parts"),
    [("no delimiter at all", 1), ("#### 1 #### 2", 3)],
)
def test_assertion_names_the_row(tmp_path: Path, answer: str, parts: int) -> None:
    source = _copy(tmp_path / "gsm8k", [*TRAIN, {"question": "q", "answer": answer}])
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as caught:
        CLEANER.run(source, out, progress=False)
    message = str(caught.value)
    assert "assertion failed" in message
    assert "main/train row 3" in message
    assert f"into {parts} parts, expected 2" in message
    assert not out.exists()
    assert list(tmp_path.glob("out.jsonl.tmp-*")) == []


def _module(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipe.clean_gsm8k_train", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    done = _module(tmp_path)
    assert done.returncode == 1
    assert "openai/gsm8k" in done.stderr
    assert (
        "hf download openai/gsm8k --repo-type dataset --local-dir raw_data/hub/openai/gsm8k"
        in done.stderr
    )
    assert not (tmp_path / "data").exists()


def test_module_reads_the_default_local_copy(tmp_path: Path) -> None:
    _copy(tmp_path / "raw_data" / "hub" / "openai" / "gsm8k", TRAIN)
    done = _module(tmp_path)
    assert done.returncode == 0, done.stderr
    written = [
        json.loads(line)
        for line in (tmp_path / "data" / "gsm8k_train.jsonl").read_text().splitlines()
    ]
    assert written == EXPECTED
    assert "3 records read, 3 rows written" in done.stdout


def test_module_source_that_does_not_exist(tmp_path: Path) -> None:
    done = _module(tmp_path, "--source", "nowhere", "--out", "x.jsonl")
    assert done.returncode == 1
    assert "--source nowhere is not a folder" in done.stderr
