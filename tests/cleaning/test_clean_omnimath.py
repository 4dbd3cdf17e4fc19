"""pipe.clean_omnimath on a local copy in the `hf download KbsdJames/Omni-MATH` layout."""

from __future__ import annotations

import json
from pathlib import Path

from pipe.clean_omnimath import CLEANER

from .upstream import assert_offline_run_names_hub_download, read_jsonl, row, run_expecting_error


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
    row("cot", "Find all $n$ such that $n^2+1$ is prime. ", "We note that..."),
    row("direct", "Find all $n$ such that $n^2+1$ is prime. ", "$n=1,2,4$"),
    row("cot", "Ünïcode problème", "Solution détaillée."),
    row("direct", "Ünïcode problème", "$\\frac{1}{2}$"),
    row("cot", "Empty answer kept", "Some proof."),
    row("direct", "Empty answer kept", ""),
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
        row(condition, item["problem"], text.strip())
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
    run_expecting_error(
        CLEANER,
        root,
        tmp_path / "out.jsonl",
        f"{root / 'test.jsonl'}: cannot read this file of the local copy of KbsdJames/Omni-MATH",
        "(config default, split test, after",
        "JSON parse error",
        "row 4",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download("pipe.clean_omnimath", tmp_path, "KbsdJames/Omni-MATH")
