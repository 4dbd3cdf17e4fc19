"""pipe.clean_principia_collection on a local copy in the `hf download` layout (two splits)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_principia_collection import CLEANER

from .upstream import read_jsonl, write_hub_copy

REPO_ROOT = Path(__file__).resolve().parents[2]


def _item(problem: str | None, answer: str | None) -> dict:
    # The upstream columns, the unused ones included.
    return {
        "topic": "Quantum mechanics",
        "problem_statement": problem,
        "answer": answer,
        "answer_type": "expression",
    }


# Split order as in the dataset card: mathematical_object, then numerical.
SPLITS = {
    ("default", "mathematical_object"): [
        _item("Derive $E_n$ for a particle in a box of width $L$. ", "$\\frac{n^2 h^2}{8mL^2}$"),
        _item(None, "orphan"),
        _item("  Énoncé avec espaces  ", "\n  x  \n"),
    ],
    ("default", "numerical"): [
        _item("Compute $\\int_0^1 x^2\\,dx$.", "1/3"),
        _item("No answer", None),
    ],
}
# Every split, in order; both fields as-is; null items dropped.
EXPECTED = [
    {
        "condition": "synth,direct",
        "instruction": "Derive $E_n$ for a particle in a box of width $L$. ",
        "response": "$\\frac{n^2 h^2}{8mL^2}$",
    },
    {
        "condition": "synth,direct",
        "instruction": "  Énoncé avec espaces  ",
        "response": "\n  x  \n",
    },
    {
        "condition": "synth,direct",
        "instruction": "Compute $\\int_0^1 x^2\\,dx$.",
        "response": "1/3",
    },
]


def test_every_split_in_order(tmp_path: Path) -> None:
    out = tmp_path / "principia_collection.jsonl"
    report = CLEANER.run(write_hub_copy(tmp_path / "copy", SPLITS), out, progress=False)
    assert read_jsonl(out) == EXPECTED
    independent = [
        {
            "condition": "synth,direct",
            "instruction": i["problem_statement"],
            "response": i["answer"],
        }
        for rows in SPLITS.values()
        for i in rows
        if i["problem_statement"] is not None and i["answer"] is not None
    ]
    assert independent == EXPECTED
    assert report.records == 5 and report.rows_written == 3
    assert dict(report.drops) == {"null problem_statement or answer": 2}


def test_wrong_type_names_the_rows(tmp_path: Path) -> None:
    splits = {("default", "numerical"): [{"problem_statement": "q", "answer": 3.5}]}
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as caught:
        CLEANER.run(write_hub_copy(tmp_path / "copy", splits), out, progress=False)
    message = str(caught.value)
    assert "default/numerical row 0" in message
    assert "column response has type double, not a string type" in message
    assert not out.exists()


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_principia_collection"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert (
        "hf download facebook/principia-collection --repo-type dataset "
        "--local-dir raw_data/hub/facebook/principia-collection"
    ) in done.stderr
    assert not (tmp_path / "data").exists()
