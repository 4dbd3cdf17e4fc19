"""pipe.clean_omnimath on a local copy in the `hf download KbsdJames/Omni-MATH` layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_omnimath import CLEANER

from .upstream import read_jsonl

REPO_ROOT = Path(__file__).resolve().parents[2]


def _item(problem: str | None, solution: str | None, answer: str | None) -> dict:
    # The upstream fields, the unused ones included.
    return {
        "domain": ["Mathematics -> Number Theory -> Other"],
        "difficulty": 6.5,
        "problem": problem,
        "solution": solution,
        "answer": answer,
        "source": "imo",
    }


ITEMS = [
    _item("Find all $n$ such that $n^2+1$ is prime. ", "\n We note that... \n", " $n=1,2,4$ "),
    _item("Ünïcode problème", "Solution détaillée.", "$\\frac{1}{2}$"),
    _item("Empty answer kept", "Some proof.", "   "),
    _item("Null answer", "Some solution.", None),
]
EXPECTED = [
    {
        "condition": "cot",
        "instruction": "Find all $n$ such that $n^2+1$ is prime. ",
        "response": "We note that...",
    },
    {
        "condition": "direct",
        "instruction": "Find all $n$ such that $n^2+1$ is prime. ",
        "response": "$n=1,2,4$",
    },
    {"condition": "cot", "instruction": "Ünïcode problème", "response": "Solution détaillée."},
    {"condition": "direct", "instruction": "Ünïcode problème", "response": "$\\frac{1}{2}$"},
    {"condition": "cot", "instruction": "Empty answer kept", "response": "Some proof."},
    {"condition": "direct", "instruction": "Empty answer kept", "response": ""},
]


def _copy(root: Path, items: list[dict]) -> Path:
    """The `hf download KbsdJames/Omni-MATH` layout: README.md and test.jsonl at the top."""
    root.mkdir(parents=True)
    (root / "README.md").write_text("---\nlicense: apache-2.0\n---\nA test stand-in.\n")
    with (root / "test.jsonl").open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    return root


def test_two_rows_per_problem(tmp_path: Path) -> None:
    out = tmp_path / "omnimath.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", ITEMS), out, progress=False)
    assert read_jsonl(out) == EXPECTED
    independent = [
        {"condition": condition, "instruction": item["problem"], "response": text.strip()}
        for item in ITEMS
        if None not in (item["problem"], item["solution"], item["answer"])
        for condition, text in (("cot", item["solution"]), ("direct", item["answer"]))
    ]
    assert independent == EXPECTED
    assert report.records == 4 and report.rows_written == 6
    assert dict(report.drops) == {"null problem, solution or answer": 1}


def test_malformed_line_names_the_file_and_row(tmp_path: Path) -> None:
    root = _copy(tmp_path / "copy", ITEMS)
    with (root / "test.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"problem": "cut short", "solution\n')
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as caught:
        CLEANER.run(root, out, progress=False)
    message = str(caught.value)
    assert f"{root} default/test: reading failed" in message
    assert "JSON parse error" in message and "row 4" in message
    assert not out.exists()


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_omnimath"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert (
        "hf download KbsdJames/Omni-MATH --repo-type dataset "
        "--local-dir raw_data/hub/KbsdJames/Omni-MATH"
    ) in done.stderr
    assert not (tmp_path / "data").exists()
