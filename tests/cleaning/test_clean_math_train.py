"""pipe.clean_math_train on a local copy in the `hf download EleutherAI/hendrycks_math` layout."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from pipe.clean_math_train import CLEANER, boxed_answer

from .upstream import (
    assert_offline_run_names_hub_download,
    read_jsonl,
    row,
    run_expecting_error,
    write_hub_copy,
)


def _item(problem: str | None, solution: str | None) -> dict:
    # The upstream columns, the unused ones included.
    return {"problem": problem, "level": "Level 2", "type": "Algebra", "solution": solution}


PREALGEBRA = [
    _item("What is $1+1$? ", "We add: $1+1=\\boxed{2}$.\n"),
    _item("Simplify $\\frac{4}{6}$.", "Divide by 2: $\\boxed{\\frac{2}{3}}$. "),
    _item("No box here.", "  The answer is 7.  "),
]
ALGEBRA = [
    _item("Two boxes?", "First $\\boxed{1}$, then finally $\\boxed{ x^{2} }$."),
    _item("Old style", "Thus $\\fbox{42}$."),
    _item("Both kinds", "$\\boxed{b}$ and later $\\fbox{f}$"),
    _item("Space before the brace", "$\\boxed {5}$"),
    _item("No brace argument", "So $\\boxed 5$ and the set $\\{1, 2\\}$ has {two} items."),
    _item("Unbalanced", "$\\boxed{3$"),
    _item("Empty box", "$\\boxed{  }$"),
    _item(None, "orphan solution"),
    _item("Ünïcode", "Réponse : $\\boxed{\\text{café}}$"),
]
# The configs in the dataset's own order (prealgebra first here, to show it is not sorted).
SPLITS = {
    ("prealgebra", "train"): PREALGEBRA,
    ("prealgebra", "test"): [_item("unused", "$\\boxed{0}$")],
    ("algebra", "train"): ALGEBRA,
    ("algebra", "test"): [_item("unused", "$\\boxed{0}$")],
}


_cot = partial(row, "cot")
_direct = partial(row, "direct")


EXPECTED = [
    _cot("What is $1+1$? ", "We add: $1+1=\\boxed{2}$."),
    _direct("What is $1+1$? ", "2"),
    _cot("Simplify $\\frac{4}{6}$.", "Divide by 2: $\\boxed{\\frac{2}{3}}$."),
    _direct("Simplify $\\frac{4}{6}$.", "\\frac{2}{3}"),
    _cot("No box here.", "The answer is 7."),
    _cot("Two boxes?", "First $\\boxed{1}$, then finally $\\boxed{ x^{2} }$."),
    _direct("Two boxes?", "x^{2}"),  # the last box, stripped
    _cot("Old style", "Thus $\\fbox{42}$."),
    _direct("Old style", "42"),
    _cot("Both kinds", "$\\boxed{b}$ and later $\\fbox{f}$"),
    _direct("Both kinds", "b"),  # \fbox only counts when there is no \boxed
    _cot("Space before the brace", "$\\boxed {5}$"),
    _direct("Space before the brace", "5"),
    # The original took "1, 2\\" (the next brace group); no direct row here.
    _cot("No brace argument", "So $\\boxed 5$ and the set $\\{1, 2\\}$ has {two} items."),
    _cot("Unbalanced", "$\\boxed{3$"),
    _cot("Empty box", "$\\boxed{  }$"),
    _cot("Ünïcode", "Réponse : $\\boxed{\\text{café}}$"),
    _direct("Ünïcode", "\\text{café}"),
]


def test_rows_of_every_config_in_order(tmp_path: Path) -> None:
    out = tmp_path / "math_train.jsonl"
    report = CLEANER.run(write_hub_copy(tmp_path / "copy", SPLITS), out, progress=False)
    assert read_jsonl(out) == EXPECTED
    assert report.records == len(PREALGEBRA) + len(ALGEBRA)
    assert report.rows_written == len(EXPECTED)
    assert dict(report.drops) == {
        "no direct row: no \\boxed{...} or \\fbox{...} answer": 3,
        "no direct row: empty boxed answer": 1,
        "null problem or solution": 1,
    }


@pytest.mark.parametrize(
    ("solution", "answer"),
    [
        ("\\boxed{a{b}c}", "a{b}c"),
        ("\\boxed{}", ""),
        ("x \\boxed{1} y \\boxed{2} z", "2"),
        ("\\fbox{1} \\fbox{2}", "2"),
        ("\\boxed{\\{x\\}}", "\\{x\\}"),  # escaped braces are braces too, as in the original
        ("\\boxed\n{n}", "n"),
        ("\\boxed{open {", None),
        ("\\boxed", None),
        ("\\boxed x {y}", None),
        ("plain text {z}", None),
    ],
)
def test_boxed_answer(solution: str, answer: str | None) -> None:
    assert boxed_answer(solution) == answer


def test_missing_field_names_the_row(tmp_path: Path) -> None:
    # Not the upstream schema: "answer" instead of "solution".
    splits = {("algebra", "train"): [{"problem": "q", "answer": "1"}]}
    run_expecting_error(
        CLEANER,
        write_hub_copy(tmp_path / "copy", splits),
        tmp_path / "out.jsonl",
        "algebra/train row 0",
        "KeyError: 'solution'",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(
        "pipe.clean_math_train", tmp_path, "EleutherAI/hendrycks_math"
    )
