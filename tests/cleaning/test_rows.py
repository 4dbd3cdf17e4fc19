"""data_io.cleaning.rows and naming: what an emitted row must be, and output names."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from data_io.cleaning.naming import safe_name, safe_names
from data_io.cleaning.rows import (
    ConditionChecker,
    Drop,
    DropCounts,
    Row,
    condition_problem,
    file_key_problem,
    row_problem,
    table_problem,
)


@pytest.mark.parametrize(
    "condition", ["direct", "cot", "noisy,cot", "synth,noisy,cot", "cot,noisy"]
)
def test_valid_conditions(condition: str) -> None:
    assert condition_problem(condition) is None


@pytest.mark.parametrize(
    ("condition", "why"),
    [
        ("", "empty"),
        ("Direct", "unknown"),
        ("noisy,", "unknown"),
        ("noisy, cot", "unknown"),
        ("cot,cot", "repeated"),
        ("reasoning", "unknown"),
    ],
)
def test_invalid_conditions(condition: str, why: str) -> None:
    problem = condition_problem(condition)
    assert problem is not None and why in problem


def test_row_problems() -> None:
    checker = ConditionChecker()
    assert row_problem(Row("cot", "q", "a"), checker, keyed=False) is None
    assert row_problem(Row("cot", "q", "a", "f"), checker, keyed=True) is None
    assert "instruction is NoneType" in row_problem(Row("cot", None, "a"), checker, keyed=False)  # type: ignore[arg-type]
    assert "response is int" in row_problem(Row("cot", "q", 3), checker, keyed=False)  # type: ignore[arg-type]
    assert "empty" in row_problem(Row("", "q", "a"), checker, keyed=False)
    assert "single file" in row_problem(Row("cot", "q", "a", "f"), checker, keyed=False)
    assert "names no output file" in row_problem(Row("cot", "q", "a"), checker, keyed=True)


@pytest.mark.parametrize("key", ["", "a/b", "..", ".hidden", "a\\b", "a\0b"])
def test_bad_file_keys(key: str) -> None:
    assert file_key_problem(key, keyed=True) is not None


def test_table_problems_name_the_row() -> None:
    checker = ConditionChecker()
    good = pa.table(
        {"condition": ["cot", "direct"], "instruction": ["a", "b"], "response": ["c", "d"]}
    )
    assert table_problem(good, checker, keyed=False) is None
    assert "columns" in table_problem(good, checker, keyed=True)
    bad = pa.table(
        {"condition": ["cot", "cot", ""], "instruction": ["a"] * 3, "response": ["c"] * 3}
    )
    assert table_problem(bad, checker, keyed=False).startswith(
        "row 2 of the table: the condition is empty"
    )
    nulls = pa.table(
        {"condition": ["cot", "cot"], "instruction": ["a", None], "response": ["c", "d"]}
    )
    assert table_problem(nulls, checker, keyed=False) == "instruction is null in row 1 of the table"
    numbers = pa.table({"condition": ["cot"], "instruction": ["a"], "response": [1]})
    assert "not a string type" in table_problem(numbers, checker, keyed=False)
    keyed = good.append_column("file", pa.array(["ok", "x/y"]))
    assert table_problem(keyed, checker, keyed=True).startswith(
        "row 1 of the table: output file key"
    )
    large = pa.table(
        {
            name: pa.array(["cot"], pa.large_string())
            for name in ("condition", "instruction", "response")
        }
    )
    assert table_problem(large, checker, keyed=False) is None


def test_drop_counts() -> None:
    counts = DropCounts()
    counts.add(Drop("a"))
    counts.add(Drop("a", 4))
    counts.add(Drop("b", 0))
    assert dict(counts) == {"a": 5, "b": 0}
    with pytest.raises(ValueError, match="negative"):
        counts.add(Drop("a", -1))


def test_safe_name_examples() -> None:
    assert safe_name("recast/recast_ner") == "recast_recast_ner"
    assert safe_name("a b-c.d_e") == "a b-c.d_e"
    assert safe_name("é中/") == "___"  # one "_" per character, nothing collapsed


def test_safe_names_matches_safe_name() -> None:
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ")
    alphabet = "aZ09_-. /\\:()é中😀\t\n'\"$"
    rng = random.Random(5)
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(500)]
    independent = ["".join(c if c in allowed else "_" for c in value) for value in values]
    assert [safe_name(v) for v in values] == independent
    assert safe_names(pa.array(values)).to_pylist() == independent
