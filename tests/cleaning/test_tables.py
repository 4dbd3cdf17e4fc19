"""data_io.cleaning.tables: the steps vectorised cleaners share, against plain Python."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from data_io.cleaning import Drop
from data_io.cleaning.tables import (
    apply_rules,
    columns_of,
    count_true,
    drop_nulls,
    first_true,
    rows_table,
)


def test_count_true_and_first_true() -> None:
    assert count_true(pa.array([True, None, False, True])) == 2
    assert count_true(pa.array([], pa.bool_())) == 0
    assert count_true(pa.chunked_array([[True], [True, None]])) == 2
    assert first_true(pa.array([None, False, True, True])) == 2
    assert first_true(pa.chunked_array([[False], [None, True]])) == 2


@pytest.mark.parametrize("kind", [pa.table, pa.record_batch])
def test_columns_in_order_and_missing_ones_named(kind) -> None:
    batch = kind({"a": ["x"], "b": ["y"], "c": ["z"]})
    assert [column.to_pylist() for column in columns_of(batch, ("c", "a"))] == [["z"], ["x"]]
    with pytest.raises(KeyError) as caught:
        columns_of(batch, ("a", "q", "r"))
    assert "column(s) ['q', 'r'] missing (found ['a', 'b', 'c'])" in str(caught.value)


@pytest.mark.parametrize("kind", [pa.table, pa.record_batch])
def test_drop_nulls(kind) -> None:
    rows = [("a", "1", None), (None, "2", "x"), ("c", None, "y"), ("d", "4", None), ("e", "5", "z")]
    batch = kind(
        {name: list(values) for name, values in zip("pqr", zip(*rows, strict=True), strict=True)}
    )
    kept, drops = drop_nulls(batch, ("p", "q"), "null p or q")
    assert kept.to_pylist() == [
        dict(zip("pqr", row, strict=True)) for row in rows if None not in row[:2]
    ]
    assert drops == [Drop("null p or q", 2)]
    same, none = drop_nulls(kept, ("p", "q"), "null p or q")
    assert same is kept and none == []
    with pytest.raises(KeyError, match=r"\['s'\] missing"):
        drop_nulls(batch, ("p", "s"), "null p or s")


def test_apply_rules_counts_each_row_under_its_first_failed_rule() -> None:
    """Differential: random masks with nulls, against a row-by-row loop."""
    rng = random.Random(3)
    values = [True, False, None]
    for _ in range(50):
        rows = rng.randrange(40)
        masks = [[rng.choice(values) for _ in range(rows)] for _ in range(rng.randrange(1, 4))]
        start = [rng.choice(values[:2]) for _ in range(rows)]
        for initial in (None, start):
            expected_keep, expected_drops = [], {}
            for row in range(rows):
                kept = initial is None or initial[row]
                for number, mask in enumerate(masks):
                    if kept and mask[row] is not True:
                        expected_drops[f"rule {number}"] = (
                            expected_drops.get(f"rule {number}", 0) + 1
                        )
                        kept = False
                expected_keep.append(kept)
            keep, drops = apply_rules(
                [(f"rule {n}", pa.array(mask, pa.bool_())) for n, mask in enumerate(masks)],
                None if initial is None else pa.array(initial, pa.bool_()),
            )
            assert keep.to_pylist() == expected_keep
            assert {drop.reason: drop.count for drop in drops} == expected_drops
            assert all(drop.count for drop in drops)  # rules that removed nothing give no drop


def test_apply_rules_needs_a_rule_or_a_mask() -> None:
    with pytest.raises(ValueError, match="at least one rule"):
        apply_rules([])
    keep = pa.array([True, False])
    assert apply_rules([], keep) == (keep, [])


def test_rows_table() -> None:
    instruction = pa.chunked_array([["q1"], ["q2"]])
    response = pa.chunked_array([["a1", "a2"]])
    single = rows_table("noisy,direct", instruction, response)
    assert single.column_names == ["condition", "instruction", "response"]
    assert single.to_pylist() == [
        {"condition": "noisy,direct", "instruction": "q1", "response": "a1"},
        {"condition": "noisy,direct", "instruction": "q2", "response": "a2"},
    ]
    keyed = rows_table(pa.array(["cot", "direct"]), instruction, response, file="f")
    assert keyed.column_names == ["condition", "instruction", "response", "file"]
    assert keyed.column("condition").to_pylist() == ["cot", "direct"]
    assert keyed.column("file").to_pylist() == ["f", "f"]
    per_row = rows_table("cot", instruction, response, file=pa.array(["x", "y"]))
    assert per_row.column("file").to_pylist() == ["x", "y"]
    empty = rows_table("cot", pa.array([], pa.string()), pa.array([], pa.string()), file="f")
    assert empty.num_rows == 0 and empty.schema.field("file").type == pa.string()
