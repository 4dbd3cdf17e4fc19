"""Steps that vectorised cleaners share: an Arrow batch of source rows in, rows and drops out.

A cleaner reading Arrow batches (``HubDataset(..., batch_rows=N)``, ``parquet_batches(n)``)
takes the columns it needs (:func:`columns_of`: a missing one is named), leaves out rows with a
null field (:func:`drop_nulls`) or failing a keep rule (:func:`apply_rules`), counting each
reason, and yields a table of rows (:func:`rows_table`). What to keep and how to build the text
stays in the cleaner module; these functions only save it the bookkeeping. :func:`as_is_rows` is
the whole of a cleaner that copies two fields unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from data_io.cleaning.rows import FILE_COLUMN, Drop

#: A column of a batch: Arrow tables give chunked arrays, record batches plain arrays.
Column = pa.Array | pa.ChunkedArray
Batch = pa.Table | pa.RecordBatch


def count_true(mask: Column) -> int:
    """How many values of a boolean column are true (nulls count as false)."""
    return int(pc.sum(mask).as_py() or 0)


def first_true(mask: Column) -> int:
    """Position of the first true value of a boolean column that has one (nulls are false)."""
    return int(pc.index(pc.fill_null(mask, False), True).as_py())


def columns_of(batch: Batch, names: Sequence[str]) -> list[Column]:
    """The named columns of ``batch``, in that order.

    Raises ``KeyError`` naming every missing column and the columns found (the runner adds the
    source row), so a renamed upstream field is reported as such, not as a pyarrow error.
    """
    found = batch.schema.names
    missing = [name for name in names if name not in found]
    if missing:
        raise KeyError(f"column(s) {missing} missing (found {found})")
    return [batch.column(name) for name in names]


def drop_nulls(batch: Batch, names: Sequence[str], reason: str) -> tuple[Batch, list[Drop]]:
    """``batch`` without the rows where any of ``names`` is null, and the drop counting them
    under ``reason`` (no drop when there are none)."""
    values = columns_of(batch, names)
    if not any(column.null_count for column in values):
        return batch, []
    complete = pc.is_valid(values[0])
    for column in values[1:]:
        complete = pc.and_(complete, pc.is_valid(column))
    kept = batch.filter(complete)
    return kept, [Drop(reason, batch.num_rows - kept.num_rows)]


def apply_rules(
    rules: Iterable[tuple[str, Column]], keep: Column | None = None
) -> tuple[Column, list[Drop]]:
    """The mask of rows that pass every rule, and the drops for the others.

    ``rules`` are ``(reason, holds)`` pairs: ``holds`` is true for the rows the rule keeps (a
    null counts as not holding). A left-out row is counted once, under the first rule it fails
    in this order, so the counts add up to the rows left out. ``keep``: the rows still in play
    from earlier steps (default: all).
    """
    drops: list[Drop] = []
    for reason, holds in rules:
        holds = pc.fill_null(holds, False)
        if keep is None:
            failed = len(holds) - count_true(holds)
            keep = holds
        else:
            narrowed = pc.and_(keep, holds)
            failed = count_true(keep) - count_true(narrowed)
            keep = narrowed
        if failed:
            drops.append(Drop(reason, failed))
    if keep is None:
        raise ValueError("apply_rules needs at least one rule or a keep mask")
    return keep, drops


def _repeated(value: str | Column, rows: int) -> Column:
    return pa.repeat(pa.scalar(value, pa.string()), rows) if isinstance(value, str) else value


def rows_table(
    condition: str | Column,
    instruction: Column,
    response: Column,
    file: str | Column | None = None,
) -> pa.Table:
    """The table of cleaned rows a vectorised cleaner yields.

    ``condition`` and ``file`` (the output file key, for cleaners writing several files) are
    either one string for every row or a column; ``file=None`` for a single output file.
    """
    rows = len(instruction)
    table = {
        "condition": _repeated(condition, rows),
        "instruction": instruction,
        "response": response,
    }
    if file is not None:
        table[FILE_COLUMN] = _repeated(file, rows)
    return pa.table(table)


def as_is_rows(
    batch: Batch, fields: tuple[str, str], condition: str, null_reason: str
) -> Iterator[pa.Table | Drop]:
    """One row per source row: ``fields`` (instruction, response) copied as-is, under a fixed
    ``condition``; a row with either field null is left out and counted under ``null_reason``."""
    kept, drops = drop_nulls(batch, fields, null_reason)
    yield from drops
    instruction, response = columns_of(kept, fields)
    yield rows_table(condition, instruction, response)
