"""pipe.clean_principia_collection on a local copy in the `hf download` layout (two splits)."""

from __future__ import annotations

from pathlib import Path

from pipe.clean_principia_collection import CLEANER

from .upstream import (
    assert_offline_run_names_hub_download,
    read_jsonl,
    row,
    run_expecting_error,
    write_hub_copy,
)


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
    row(
        "synth,direct",
        "Derive $E_n$ for a particle in a box of width $L$. ",
        "$\\frac{n^2 h^2}{8mL^2}$",
    ),
    row("synth,direct", "  Énoncé avec espaces  ", "\n  x  \n"),
    row("synth,direct", "Compute $\\int_0^1 x^2\\,dx$.", "1/3"),
]


def test_every_split_in_order(tmp_path: Path) -> None:
    out = tmp_path / "principia_collection.jsonl"
    report = CLEANER.run(write_hub_copy(tmp_path / "copy", SPLITS), out, progress=False)
    assert read_jsonl(out) == EXPECTED
    independent = [
        row("synth,direct", i["problem_statement"], i["answer"])
        for rows in SPLITS.values()
        for i in rows
        if i["problem_statement"] is not None and i["answer"] is not None
    ]
    assert independent == EXPECTED
    assert report.records == 5 and report.rows_written == 3
    assert dict(report.drops) == {"null problem_statement or answer": 2}


def test_wrong_type_names_the_rows(tmp_path: Path) -> None:
    splits = {("default", "numerical"): [{"problem_statement": "q", "answer": 3.5}]}
    run_expecting_error(
        CLEANER,
        write_hub_copy(tmp_path / "copy", splits),
        tmp_path / "out.jsonl",
        "default/numerical row 0",
        "column response has type double, not a string type",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(
        "pipe.clean_principia_collection", tmp_path, "facebook/principia-collection"
    )
