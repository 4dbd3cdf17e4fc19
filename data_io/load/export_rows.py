"""Export one epoch of an HRM-Text sampled folder (formats.md §4) as tokenized rows.

Each epoch row, in epoch order, becomes ``{"input_ids": i + o, "labels": [-100] * len(i) + o}``
with ``i`` the instruction (BOQ … EOQ) and ``o`` the response (… EOA): labels aligned with
input_ids, the Hugging Face and xorl convention (the model shifts them). After the shift the
EOQ position predicts the first response token and EOA is supervised, exactly the supervision of
the trainer's packed layout (formats.md §5, ``target_only``); the exported file is therefore a
``TokenizedRowsDataset`` source, which lets a user move between the two worlds.

Rows are gathered with the loader's vectorised ``_gather_rows`` (one fancy index per batch of
rows, token ids checked against the vocabulary) and written as Parquet a batch at a time, to a
temporary name renamed into place when complete.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from data_io.errors import ConfigError, InputError, OutputError, os_error_message
from data_io.formats.sampled import open_epoch, open_tokens, read_metadata
from data_io.load.packing.layouts import IGNORE_INDEX, _gather_rows
from data_io.util.fs import publish_mode
from data_io.util.stale import remove_dead_siblings, temporary_prefix

__all__ = ["export_sampled_rows"]

# Tokens per written batch: bounds memory, and keeps list offsets far below 2**31.
_BATCH_TOKENS = 1 << 24


def _batch(
    tokens: np.ndarray,
    arrays: list[np.ndarray],
    lo: int,
    hi: int,
    vocab: int | None,
    id_type: pa.DataType,
) -> tuple[pa.RecordBatch, int]:
    """Rows ``lo .. hi - 1`` as a record batch, and how many labels are supervised."""
    ist, il, rst, rl = (np.asarray(a[lo:hi], dtype=np.int64) for a in arrays)
    full = _gather_rows(tokens, np.arange(lo, hi, dtype=np.int64), ist, il, rst, rl, vocab)
    lengths = il + rl
    row_at = np.cumsum(lengths) - lengths
    column = np.arange(full.shape[0], dtype=np.int64) - np.repeat(row_at, lengths)
    values = full.astype(id_type.to_pandas_dtype())
    labels = values.copy()
    labels[column < np.repeat(il, lengths)] = IGNORE_INDEX  # the instruction has no loss
    offsets = pa.array(np.concatenate(([0], np.cumsum(lengths))).astype(np.int32))
    batch = pa.RecordBatch.from_arrays(
        [pa.ListArray.from_arrays(offsets, values), pa.ListArray.from_arrays(offsets, labels)],
        names=["input_ids", "labels"],
    )
    return batch, int(rl.sum())


def export_sampled_rows(
    sampled_dir: str | os.PathLike[str], output: str | os.PathLike[str], *, epoch: int = 0
) -> dict[str, Any]:
    """Write epoch ``epoch`` of ``sampled_dir`` to the Parquet file ``output``; returns counts."""
    folder, out = Path(sampled_dir), Path(output)
    if out.suffix.lower() != ".parquet":
        raise ConfigError(f"-o {out}: the export writes Parquet; give a name ending in .parquet")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ConfigError(f"--epoch must be a non-negative integer, got {epoch!r}")
    meta = read_metadata(folder)
    tokens = open_tokens(folder, meta)
    index = open_epoch(folder, epoch, int(tokens.shape[0]), meta)
    arrays = [index.inst_start, index.inst_len, index.resp_start, index.resp_len]
    # Signed, for -100; int32 holds every id of the sampler's uint8/uint16/int32 pools.
    wide = np.dtype(tokens.dtype).itemsize > 4 or np.dtype(tokens.dtype) == np.uint32
    id_type = pa.int64() if wide else pa.int32()
    schema = pa.schema([("input_ids", pa.list_(id_type)), ("labels", pa.list_(id_type))])
    rows_per_batch = max(1, _BATCH_TOKENS // max(meta.max_seq_len, 1))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_siblings(out.parent, out.name, "partial export")  # of killed runs
        fd, tmp_name = tempfile.mkstemp(prefix=temporary_prefix(out.name), dir=out.parent)
        publish_mode(tmp_name)
        os.close(fd)
    except OSError as err:
        raise OutputError(f"{out}: cannot create the output: {os_error_message(err)}") from err
    tmp = Path(tmp_name)
    supervised = 0
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            for lo in range(0, index.rows, rows_per_batch):
                hi = min(index.rows, lo + rows_per_batch)
                try:
                    batch, sup = _batch(tokens, arrays, lo, hi, meta.vocab_size, id_type)
                except InputError as err:  # an id outside the vocabulary: name the folder
                    raise InputError(f"{folder / f'epoch_{epoch}'}: {err}") from None
                writer.write_batch(batch)
                supervised += sup
        os.replace(tmp, out)
    except OSError as err:  # no space, or a folder in the way of the rename
        raise OutputError(f"{out}: cannot write the export: {os_error_message(err)}") from err
    finally:
        tmp.unlink(missing_ok=True)
    lengths = np.asarray(index.inst_len, dtype=np.int64) + np.asarray(
        index.resp_len, dtype=np.int64
    )
    return {
        "sampled_dir": str(folder),
        "epoch": epoch,
        "output": str(out),
        "rows": index.rows,
        "tokens": int(lengths.sum()),
        "supervised_tokens": supervised,
    }
