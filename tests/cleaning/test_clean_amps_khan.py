"""pipe.clean_amps_khan on an extracted `amps/khan` tree (one JSON object per file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_amps_khan import CLEANER

from .upstream import read_jsonl, row, run_expecting_error, write_json

# Written in an order other than the sorted one: the output follows sorted paths.
FILES = {
    "quadratic_formula/2.json": {
        "problem": "Solve $x^2 - 5x + 6 = 0$. ",
        "hints": ["  Factor the quadratic.", "$(x-2)(x-3) = 0$", "$x = 2$ or $x = 3$\n"],
    },
    "adding_fractions/10.json": {
        "problem": "Ünïcode: $\\frac12 + \\frac13$?",
        "hints": ["$\\frac56$"],
    },
    "adding_fractions/1.json": {"problem": "No hints at all", "hints": []},
    "quadratic_formula/deeper/3.json": {"problem": "Nested", "hints": ["", "  ", "x"], "extra": 1},
    "top.json": {"problem": "", "hints": ["\n"]},
}
EXPECTED = [
    row("noisy,cot", "No hints at all", ""),
    row("noisy,cot", "Ünïcode: $\\frac12 + \\frac13$?", "$\\frac56$"),
    row(
        "noisy,cot",
        "Solve $x^2 - 5x + 6 = 0$. ",
        "Factor the quadratic.\n$(x-2)(x-3) = 0$\n$x = 2$ or $x = 3$",
    ),
    row("noisy,cot", "Nested", "x"),
    row("noisy,cot", "", ""),
]


def _tree(root: Path, files: dict[str, object]) -> Path:
    for name, value in files.items():
        write_json(root / name, value)
    (root / "adding_fractions" / "notes.txt").write_text("not a JSON file")
    return root


def test_rows_in_sorted_path_order(tmp_path: Path) -> None:
    source = _tree(tmp_path / "khan", FILES)
    out = tmp_path / "out" / "amps_khan.jsonl"
    report = CLEANER.run(source, out, progress=False)
    assert read_jsonl(out) == EXPECTED
    independent = [
        row("noisy,cot", FILES[name]["problem"], "\n".join(FILES[name]["hints"]).strip())
        for name in sorted(FILES, key=lambda name: Path(name).parts)
    ]
    assert independent == EXPECTED
    assert report.records == 5 and report.rows_written == 5 and not report.drops


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"problem": "p", "hints": ["ok", 3]}, "hints is not a list of strings"),
        ({"problem": "p", "hints": "not a list"}, "hints is not a list of strings"),
        ({"problem": None, "hints": []}, "problem is NoneType, not a string"),
        ({"question": "p", "hints": []}, "KeyError: 'problem'"),
    ],
)
def test_bad_file_is_named(tmp_path: Path, value: dict, problem: str) -> None:
    source = _tree(tmp_path / "khan", {**FILES, "quadratic_formula/5.json": value})
    run_expecting_error(
        CLEANER,
        source,
        tmp_path / "out.jsonl",
        f"{source}/quadratic_formula/5.json object 0",
        problem,
    )


def test_not_json_is_named(tmp_path: Path) -> None:
    source = _tree(tmp_path / "khan", FILES)
    (source / "adding_fractions" / "9.json").write_text('{"problem": "cut')
    with pytest.raises(InputError, match=r"adding_fractions/9\.json: not valid UTF-8 JSON"):
        CLEANER.run(source, tmp_path / "out.jsonl", progress=False)
    (source / "adding_fractions" / "9.json").write_text('["an", "array"]')
    with pytest.raises(InputError, match=r"adding_fractions/9\.json: expected a JSON object"):
        CLEANER.run(source, tmp_path / "out.jsonl", progress=False)


def test_missing_tree_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_expecting_error(
        CLEANER,
        None,
        None,
        "raw input not found: raw_data/amps/khan",
        "tar -xzf raw_data/amps.tar.gz -C raw_data",
    )
    assert not (tmp_path / "data").exists()
