"""pipe.clean_platypus.clean_arb on the five ARB JSON arrays."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_platypus.clean_arb import CLEANER

from .upstream import read_outputs, row, run_expecting_error, write_json

ITEMS = {
    "math.json": [
        {"instruction": "Compute $\\int_0^1 x\\,dx$.", "response": " $1/2$ \n"},
        {"instruction": "2+2", "response": "4", "extra_field": "ignored"},
    ],
    "reading.json": [{"instruction": "Read: «texte».", "response": "B"}],
    "law.json": [{"instruction": "Which option?\nA) x\nB) y", "response": "A"}],
    "science.json": [],
    "physics.json": [{"instruction": "", "response": ""}],
}
# Instruction = description + blank line + instruction; response kept as-is (not stripped).
EXPECTED = {
    "arb_math.jsonl": [
        row("cot", "Solve the math problem.\n\nCompute $\\int_0^1 x\\,dx$.", " $1/2$ \n"),
        row("cot", "Solve the math problem.\n\n2+2", "4"),
    ],
    "arb_reading.jsonl": [
        row("cot", "Solve the reading comprehension problem.\n\nRead: «texte».", "B")
    ],
    "arb_law.jsonl": [
        row("direct", "Choose the correct option letter.\n\nWhich option?\nA) x\nB) y", "A")
    ],
    "arb_physics.jsonl": [row("cot", "Solve the physics problem.\n\n", "")],
}


def _raw(root: Path, items: dict[str, list]) -> Path:
    for name, value in items.items():
        write_json(root / name, value)
    return root


def test_rows_per_file(tmp_path: Path) -> None:
    source = _raw(tmp_path / "ARB", ITEMS)
    (tmp_path / "ARB" / "README.md").write_text("not read")
    out = tmp_path / "Platypus"
    out.mkdir()
    (out / "openbookqa.jsonl").write_text("another cleaner's file\n")
    report = CLEANER.run(source, out, progress=False)
    written = read_outputs(report)
    # science.json is an empty array: nothing to write, so no file.
    assert written == EXPECTED
    assert sorted(p.name for p in out.iterdir()) == sorted([*EXPECTED, "openbookqa.jsonl"])
    assert (out / "openbookqa.jsonl").read_text() == "another cleaner's file\n"
    assert report.records == 5 and report.rows_written == 5 and not report.drops


def test_a_file_left_without_rows_removes_the_last_runs_output_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where runs record outputs
    source = _raw(tmp_path / "ARB", ITEMS)
    out = tmp_path / "Platypus"
    out.mkdir()
    (out / "openbookqa.jsonl").write_text("another cleaner's file\n")
    CLEANER.run(source, out, progress=False)
    write_json(source / "law.json", [])  # law.json now yields no rows
    report = CLEANER.run(source, out, progress=False)
    assert report.removed == [out / "arb_law.jsonl"]
    assert not (out / "arb_law.jsonl").exists()
    assert "removed " in report.format() and "this run had no rows for it" in report.format()
    # Only the files of the cleaner's own last run: the other cleaner's file stays.
    assert (out / "openbookqa.jsonl").read_text() == "another cleaner's file\n"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*(set(EXPECTED) - {"arb_law.jsonl"}), "openbookqa.jsonl"]
    )


def test_missing_file_is_named(tmp_path: Path) -> None:
    items = dict(ITEMS)
    del items["law.json"]
    source = _raw(tmp_path / "ARB", items)
    with pytest.raises(InputError, match=r"required file law\.json not found"):
        CLEANER.run(source, tmp_path / "out", progress=False)


def test_missing_folder_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_expecting_error(
        CLEANER,
        None,
        None,
        "raw_data/Platypus/ARB",
        "hf download imone/ARB --repo-type dataset --local-dir raw_data/Platypus/ARB",
    )
    assert not (tmp_path / "data").exists()


def test_bad_items_are_named(tmp_path: Path) -> None:
    items = {
        **ITEMS,
        "law.json": [
            {"instruction": "ok", "response": "A"},
            {"instruction": "q", "response": None},
        ],
    }
    with pytest.raises(InputError, match=r"law\.json item 1: response is NoneType, not a string"):
        CLEANER.run(_raw(tmp_path / "ARB", items), tmp_path / "out", progress=False)
    items = {**ITEMS, "law.json": {"not": "an array"}}
    with pytest.raises(InputError, match=r"law\.json: expected a JSON array"):
        CLEANER.run(_raw(tmp_path / "ARB2", items), tmp_path / "out", progress=False)
    items = {**ITEMS, "law.json": [{"response": "A"}]}
    missing = r"law\.json item 0: no field 'instruction' \(its fields: response\); KeyError"
    with pytest.raises(InputError, match=missing):
        CLEANER.run(_raw(tmp_path / "ARB3", items), tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
