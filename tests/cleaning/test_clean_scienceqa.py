"""pipe.clean_platypus.clean_scienceqa on a local copy in the
`hf download metaeval/ScienceQA_text_only` layout (data/<split>-*.parquet)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipe.clean_platypus.clean_scienceqa import CLEANER

from .upstream import read_jsonl, row, run_expecting_error

COT = "Solve the following question using the information provided in the lecture."
DIRECT = (
    "Choose the correct option letter for the following question based on the information "
    "from the lecture."
)


def _item(question: str, choices: list[str], answer: int, lecture: str, solution: str) -> dict:
    return {
        "question": question,
        "choices": choices,
        "answer": answer,
        "hint": "not used",
        "task": "closed choice",
        "grade": "grade2",
        "subject": "natural science",
        "topic": "t",
        "category": "c",
        "skill": "s",
        "lecture": lecture,
        "solution": solution,
    }


SPLITS = {
    "train": [
        # Lecture and solution: both rows use the lecture template; text fields stripped.
        _item(
            " Which is a gas?\n", [" steam ", "ice"], 0, " Matter has states. ", " Steam is a gas. "
        ),
        # No lecture, a solution: the bare template for both rows.
        _item("2 + 2?", ["3", "4", "5"], 1, "", "Adding gives 4."),
    ],
    "validation": [
        # A lecture but no solution (whitespace only): the direct row only.
        _item("Pick C", ["a", "b", "c"], 2, "L", "  \n"),
    ],
    "test": [
        # Neither: the direct row only, bare template. The test split is read.
        _item("Ünï?", ["yes", "no"], 1, "", ""),
    ],
}
EXPECTED = [
    row(
        "cot",
        f"{COT}\n\nWhich is a gas?\nOptions:\nA: steam\nB: ice\n\nLecture: Matter has states.",
        "Steam is a gas.\n\nAnswer: A",
    ),
    row(
        "direct",
        f"{DIRECT}\n\nWhich is a gas?\nOptions:\nA: steam\nB: ice\n\nLecture: Matter has states.",
        "A",
    ),
    row("cot", "2 + 2?\nOptions:\nA: 3\nB: 4\nC: 5", "Adding gives 4.\n\nAnswer: B"),
    row("direct", "2 + 2?\nOptions:\nA: 3\nB: 4\nC: 5", "B"),
    row("direct", f"{DIRECT}\n\nPick C\nOptions:\nA: a\nB: b\nC: c\n\nLecture: L", "C"),
    row("direct", "Ünï?\nOptions:\nA: yes\nB: no", "B"),
]

# The upstream schema: `answer` is int8, `choices` a list of strings.
SCHEMA = pa.schema(
    [("question", pa.string()), ("choices", pa.list_(pa.string())), ("answer", pa.int8())]
    + [
        (name, pa.string())
        for name in (
            "hint",
            "task",
            "grade",
            "subject",
            "topic",
            "category",
            "skill",
            "lecture",
            "solution",
        )
    ]
)


def _copy(root: Path, splits: dict[str, list[dict]]) -> Path:
    for split, items in splits.items():
        path = root / "data" / f"{split}-00000-of-00001-0123abcd.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(items, schema=SCHEMA), path)
    (root / "README.md").write_text("---\nlanguage: en\n---\nScienceQA text only, a stand-in.\n")
    return root


def _independent(splits: dict[str, list[dict]]) -> list[dict]:
    """cleaners.md §3.14 re-derived with plain concatenation."""
    rows = []
    for split in ("train", "validation", "test"):
        for item in splits[split]:
            letter = "ABCDE"[item["answer"]]
            body = item["question"].strip() + "\nOptions:"
            for i, choice in enumerate(item["choices"]):
                body += "\n" + "ABCDE"[i] + ": " + choice.strip()
            lecture, solution = item["lecture"].strip(), item["solution"].strip()
            tail = "\n\nLecture: " + lecture if lecture else ""
            if solution:
                head = COT + "\n\n" if lecture else ""
                rows.append(row("cot", head + body + tail, solution + "\n\nAnswer: " + letter))
            head = DIRECT + "\n\n" if lecture else ""
            rows.append(row("direct", head + body + tail, letter))
    return rows


def test_rows(tmp_path: Path) -> None:
    source = _copy(tmp_path / "scienceqa", SPLITS)
    out = tmp_path / "Platypus" / "scienceqa.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent(SPLITS)
    assert (report.records, report.rows_written) == (4, 6)
    assert dict(report.drops) == {"no cot row: empty solution": 2}


def test_null_field_is_counted(tmp_path: Path) -> None:
    splits = {**SPLITS, "test": [*SPLITS["test"], {**SPLITS["test"][0], "lecture": None}]}
    report = CLEANER.run(_copy(tmp_path / "s", splits), tmp_path / "out.jsonl", progress=False)
    assert report.rows_written == 6
    assert dict(report.drops) == {"no cot row: empty solution": 2, "null field": 1}


@pytest.mark.parametrize("answer", [2, -1])
def test_answer_out_of_range_is_named(tmp_path: Path, answer: int) -> None:
    splits = {
        **SPLITS,
        "validation": [*SPLITS["validation"], _item("q", ["a", "b"], answer, "", "")],
    }
    run_expecting_error(
        CLEANER,
        _copy(tmp_path / "s", splits),
        tmp_path / "out.jsonl",
        "default/validation row 1",
        f"answer {answer} is not the index of one of the 2 choices",
    )
