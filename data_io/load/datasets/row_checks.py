"""The checks of tokenized rows (``check_rows``): every row of a source validated with
pyarrow/numpy over whole list columns, one record batch at a time, never a Python loop per
token; a bad row is named by its source and row number, with what to do."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from data_io.errors import InputError
from data_io.load.datasets.row_sources import REQUIRED_COLUMNS, RowSource
from data_io.load.packing.layouts import IGNORE_INDEX

__all__ = ["RowStats", "check_chunk", "check_rows"]


@dataclass(frozen=True)
class RowStats:
    """What ``check_rows`` found in one source (after ``max_seq_len`` truncation)."""

    rows: int
    tokens: int
    truncated_rows: int
    truncated_tokens: int
    longest: int
    supervised_tokens: int  # labels other than -100

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def _row_of(offsets: np.ndarray, element: int) -> int:
    return int(np.searchsorted(offsets, element, side="right")) - 1


def _first_non_integer_row(chunk: pa.Array) -> int:
    """The first row of a list column whose values are not all integers (the column's type is
    that of its worst row: one float or string makes every row double or JSON); 0 when no row
    can be told apart (every value a whole float). Only on the error path: Python objects."""
    for row, values in enumerate(chunk.to_pylist()):
        for value in values or []:
            if isinstance(value, str):  # a JSON-typed column keeps each value as JSON text
                try:
                    value = json.loads(value)
                except ValueError:
                    return row
            whole = isinstance(value, float) and value.is_integer()
            if isinstance(value, bool) or not (isinstance(value, int) or whole):
                return row
    return 0


def _flatten(
    chunk: pa.Array, column: str, source: RowSource, base: int, *, numeric: str
) -> tuple[np.ndarray, np.ndarray]:
    """Row lengths and flat values of one chunk of a list column, type- and null-checked."""
    kind = chunk.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        raise InputError(
            f"source {source.label!r} row {base}: column {column!r} has type {kind}, not a list; "
            "each row needs a list of token ids"
        )
    if chunk.null_count:
        row = base + int(np.argmax(np.asarray(chunk.is_null())))
        raise InputError(
            f"source {source.label!r} row {row}: column {column!r} is null; every row needs a list"
        )
    lengths = np.asarray(pc.list_value_length(chunk), dtype=np.int64)
    flat = pc.list_flatten(chunk)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    value_type = flat.type
    ok = pa.types.is_integer(value_type) or (
        numeric == "number" and pa.types.is_floating(value_type)
    )
    if not ok:
        want = "integers" if numeric == "integer" else "numbers"
        row = base + _first_non_integer_row(chunk)
        raise InputError(
            f"source {source.label!r} row {row}: column {column!r} holds {value_type} values, "
            f"not {want}; write the ids as integers"
        )
    if flat.null_count:
        element = int(np.argmax(np.asarray(flat.is_null())))
        raise InputError(
            f"source {source.label!r} row {base + _row_of(offsets, element)}: column "
            f"{column!r} holds a null inside its list; every position needs a value"
        )
    if (
        pa.types.is_uint64(value_type)
        and len(flat)
        and pc.max(flat).as_py() > np.iinfo(np.int64).max
    ):
        element = int(np.argmax(np.asarray(flat) > np.iinfo(np.int64).max))
        raise InputError(
            f"source {source.label!r} row {base + _row_of(offsets, element)}: column "
            f"{column!r} holds an id beyond int64; the ids are corrupt"
        )
    values = np.asarray(flat.to_numpy(zero_copy_only=False))
    return lengths, values if numeric == "number" else values.astype(np.int64, copy=False)


def _first_bad(bad: np.ndarray, offsets: np.ndarray | None, base: int) -> int | None:
    """Row (absolute) of the first True in ``bad`` (per row, or per element with offsets)."""
    if not bad.any():
        return None
    at = int(np.argmax(bad))
    return base + (at if offsets is None else _row_of(offsets, at))


def check_chunk(
    table: pa.RecordBatch, columns: list[str], source: RowSource, base: int, vocab_size: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and per-row supervised-label counts of one record batch of rows."""
    where = f"source {source.label!r}"
    ids_len, ids = _flatten(table.column("input_ids"), "input_ids", source, base, numeric="integer")
    lab_len, labels = _flatten(table.column("labels"), "labels", source, base, numeric="integer")
    offsets = np.concatenate(([0], np.cumsum(ids_len)))
    if (row := _first_bad(ids_len == 0, None, base)) is not None:
        raise InputError(f"{where} row {row}: input_ids is empty; drop the row from the data")
    if (row := _first_bad(ids_len != lab_len, None, base)) is not None:
        r = row - base
        raise InputError(
            f"{where} row {row}: {ids_len[r]} input_ids but {lab_len[r]} labels; labels are "
            "aligned with input_ids (one per token, -100 where no loss)"
        )
    if (row := _first_bad(ids < 0, offsets, base)) is not None:
        raise InputError(f"{where} row {row}: a negative token id in input_ids; ids are >= 0")
    if (row := _first_bad((labels < 0) & (labels != IGNORE_INDEX), offsets, base)) is not None:
        raise InputError(
            f"{where} row {row}: a negative label other than {IGNORE_INDEX}; a label is a "
            f"token id or {IGNORE_INDEX} (no loss)"
        )
    if vocab_size is not None:
        for name, values in (("input_ids", ids), ("labels", labels)):
            if (row := _first_bad(values >= vocab_size, offsets, base)) is not None:
                r = row - base
                bad = values[offsets[r] : offsets[r + 1]]
                raise InputError(
                    f"{where} row {row}: {name} holds id {int(bad.max())}, not below "
                    f"vocab_size={vocab_size}; the rows were tokenized with another tokenizer "
                    "(re-tokenize them) or data.vocab_size is wrong"
                )
    for column in columns:
        if column in REQUIRED_COLUMNS:
            continue
        extra_len, _ = _flatten(table.column(column), column, source, base, numeric="number")
        if (row := _first_bad(extra_len != ids_len, None, base)) is not None:
            r = row - base
            raise InputError(
                f"{where} row {row}: selected column {column!r} has {extra_len[r]} values for "
                f"{ids_len[r]} tokens; extra columns are per-token lists like input_ids"
            )
    supervised = np.add.reduceat((labels != IGNORE_INDEX).astype(np.int64), offsets[:-1])
    return ids_len, supervised


def check_rows(
    source: RowSource, dataset: Any, vocab_size: int | None = None
) -> tuple[np.ndarray, RowStats]:
    """Validate every row of ``dataset``; returns each row's length after truncation and stats.
    With ``vocab_size`` every id in input_ids and labels must be below it.

    Works one Arrow record batch at a time (bounded memory), vectorised within it.
    """
    table = dataset.data.table
    columns = list(dataset.column_names)
    lengths, supervised = [], []
    base = 0
    for batch in table.to_batches(max_chunksize=65536):
        got, sup = check_chunk(batch, columns, source, base, vocab_size)
        lengths.append(got)
        supervised.append(sup)
        base += batch.num_rows
    full = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    cut = full if source.max_seq_len is None else np.minimum(full, source.max_seq_len)
    # Supervised counts are reported before truncation: what the data holds, not what is kept.
    stats = RowStats(
        rows=int(full.shape[0]),
        tokens=int(cut.sum()),
        truncated_rows=int(np.count_nonzero(full > cut)),
        truncated_tokens=int((full - cut).sum()),
        longest=int(cut.max()) if cut.size else 0,
        supervised_tokens=int(np.concatenate(supervised).sum()) if supervised else 0,
    )
    return cut, stats
