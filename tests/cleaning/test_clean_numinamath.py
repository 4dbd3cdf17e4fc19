"""pipe.clean_numinamath on a local copy in the `hf download AI-MO/NuminaMath-1.5` layout."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from pipe.clean_numinamath import CLEANER

from .upstream import (
    assert_offline_run_names_hub_download,
    read_jsonl,
    row,
    run_expecting_error,
    write_hub_copy,
)


def _item(
    problem: str | None = "  Find $x$ if $2x = 6$. ",
    solution: str | None = "\nDivide by 2: $x = 3$.\n",
    answer: str | None = " 3 ",
    *,
    question_type: str | None = "math-word-problem",
    problem_ok: str | None = "Yes",
    solution_ok: str | None = "Yes",
    synthetic: bool | None = False,
) -> dict:
    # Every upstream column, in the upstream order.
    return {
        "problem": problem,
        "solution": solution,
        "answer": answer,
        "problem_type": "Algebra",
        "question_type": question_type,
        "problem_is_valid": problem_ok,
        "solution_is_valid": solution_ok,
        "source": "olympiads",
        "synthetic": synthetic,
    }


TRAIN = [
    _item(),
    _item(synthetic=True),
    _item(synthetic=None),
    _item(problem_ok="No"),
    _item(problem_ok="yes"),  # the test is exact
    _item(solution_ok="Incomplete"),
    _item(solution_ok=None),
    _item(solution=None),
    _item(answer=None),
    _item(problem="See https://example.org for the figure."),
    _item(solution="As shown at http://x.y, ..."),
    _item(solution="Solution: 3.\n\nTranslate the text above into English, please."),
    _item(problem=" \n "),
    _item(solution="\t"),
    _item("Prove that $\\sqrt 2$ is irrational.", "Suppose not...", "proof", question_type="proof"),
    _item("Show $a^2 \\ge 0$.", "Squares are non-negative.", "proof", question_type="math-word"),
    _item("Labelled proof, real answer", "Because...", "7", question_type="proof"),
    _item("' proof ' is not 'proof'", "Hmm.", " proof "),  # compared unstripped, as upstream
    _item("Empty answer", "Some work.", "  "),
    _item("No answer found upstream", "Some work.", "notfound"),
    _item("Ünïcode problème", "Réponse détaillée : $\\frac{1}{2}$.", "$\\frac{1}{2}$"),
]


_cot = partial(row, "noisy,cot")
_direct = partial(row, "noisy,direct")


EXPECTED = [
    _cot("Find $x$ if $2x = 6$.", "Divide by 2: $x = 3$."),
    _direct("Find $x$ if $2x = 6$.", "3"),
    _cot("Prove that $\\sqrt 2$ is irrational.", "Suppose not..."),
    _cot("Show $a^2 \\ge 0$.", "Squares are non-negative."),
    _cot("Labelled proof, real answer", "Because..."),
    _cot("' proof ' is not 'proof'", "Hmm."),
    _direct("' proof ' is not 'proof'", "proof"),
    _cot("Empty answer", "Some work."),
    _cot("No answer found upstream", "Some work."),
    _direct("No answer found upstream", "notfound"),
    _cot("Ünïcode problème", "Réponse détaillée : $\\frac{1}{2}$."),
    _direct("Ünïcode problème", "$\\frac{1}{2}$"),
]


def _independent(items: list[dict]) -> list[dict]:
    """cleaners.md §3.6 written out again in plain Python, one condition per rule."""
    rows = []
    for x in items:
        keep = (
            x["synthetic"] is False
            and x["problem_is_valid"] == "Yes"
            and x["solution_is_valid"] == "Yes"
            and x["solution"] is not None
            and x["answer"] is not None
            and x["problem"] is not None
            and "http" not in x["problem"]
            and "http" not in x["solution"]
            and "Translate the text above into English" not in x["solution"]
            and x["problem"].strip() != ""
            and x["solution"].strip() != ""
        )
        if not keep:
            continue
        problem = x["problem"].strip()
        rows.append(row("noisy,cot", problem, x["solution"].strip()))
        if x["question_type"] != "proof" and x["answer"] != "proof" and x["answer"].strip():
            rows.append(row("noisy,direct", problem, x["answer"].strip()))
    return rows


def test_filters_rows_and_drops(tmp_path: Path) -> None:
    out = tmp_path / "numinamath.jsonl"
    source = write_hub_copy(tmp_path / "copy", {("default", "train"): TRAIN})
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent(TRAIN)
    assert report.records == len(TRAIN) and report.rows_written == len(EXPECTED)
    assert dict(report.drops) == {
        "synthetic": 2,
        "problem not valid": 2,
        "solution not valid": 2,
        "null problem, solution or answer": 2,
        "contains http": 2,
        "translation artefact": 1,
        "empty problem or solution": 2,
        "no direct row: proof": 3,
        "no direct row: empty answer": 1,
    }


def test_many_batches_equal_the_plain_python_rules(tmp_path: Path) -> None:
    """Differential over several Arrow batches: every fixture item, cycled with varied texts."""
    items = []
    for i in range(20_000):
        item = dict(TRAIN[i % len(TRAIN)])
        if item["problem"] is not None:
            item["problem"] = f"{item['problem']} #{i}" if i % 3 else item["problem"]
        items.append(item)
    out = tmp_path / "out.jsonl"
    source = write_hub_copy(tmp_path / "copy", {("default", "train"): items})
    report = CLEANER.run(source, out, progress=False)
    expected = _independent(items)
    assert read_jsonl(out) == expected
    assert report.records == 20_000 and report.rows_written == len(expected)


def test_missing_column_names_the_row(tmp_path: Path) -> None:
    items = [{key: value for key, value in _item().items() if key != "synthetic"}]
    source = write_hub_copy(tmp_path / "copy", {("default", "train"): items})
    run_expecting_error(
        CLEANER,
        source,
        tmp_path / "out.jsonl",
        "default/train row 0",
        "column(s) ['synthetic'] missing",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download("pipe.clean_numinamath", tmp_path, "AI-MO/NuminaMath-1.5")
