"""``StreamingTokenizedRowsDataset``: xorl's tokenized rows with ``streaming: true``.

Every source is opened with ``datasets.load_dataset(..., streaming=True)`` and read in order
(sources one after the other, no shuffle: a stream has no random access). The rows are packed
``sequential``-ly into bins of ``sample_packing_sequence_len`` tokens, as ``TokenizedRowsDataset``
packs them (the same items: ``assemble_item``), a new bin starting when the next row does not
fit; the last bin of a stream is padded.

Sharding: stream ``g = rank * num_workers + worker`` of ``G = world_size * num_workers`` reads
``datasets.distributed.split_dataset_by_node(source, rank=g, world_size=G)`` of every source:
whole files (the stream's ``n_shards``) when their number divides by G, else every G-th row.
Either way no two ranks or workers read the same row, and together they read every row once.
Rows are read with ``IterableDataset.iter``, which leaves the worker split to us (iterating the
dataset itself would split it over DataLoader workers a second time).

Resume: each item carries ``stream_id``, ``stream_row`` (the source being read) and
``stream_offset`` (rows of that source this stream has consumed, the item's included); the
``StatefulLoader`` records them and hands them back through ``load_state_dict``, and the stream
drops those rows as it reads them (not with ``IterableDataset.skip``, which on a source split
by rows skips the source's first rows). Exact with the same ranks and workers; a state of
another topology is refused (the split into G parts changes which rows a stream holds).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from torch.utils.data import IterableDataset, get_worker_info

from data_io.errors import ConfigError, InputError
from data_io.load.datasets.row_checks import check_chunk
from data_io.load.datasets.row_sources import REQUIRED_COLUMNS, RowSource, open_stream
from data_io.load.datasets.tokenized_rows import (
    _as_sources,
    _extras,
    assemble_item,
    check_ring_multiple,
    padded_length,
)
from data_io.load.packing.row_bins import check_sequence_len
from data_io.load.stream_state import STREAM_KEYS, parse_stream_state

__all__ = ["StreamingTokenizedRowsDataset"]

_BATCH_ROWS = 256  # rows read and checked at once
_VERSION = 1


def _positive(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _as_list(values: list[Any], column: str, source: RowSource, base: int) -> list[Any]:
    """CSV streams hold the lists as JSON text: parsed here, row by row."""
    out = []
    for k, cell in enumerate(values):
        if isinstance(cell, str):
            try:
                cell = json.loads(cell)
            except json.JSONDecodeError as err:
                raise InputError(
                    f"source {source.label!r} row {base + k}: column {column!r} holds "
                    f"{cell[:40]!r}, not a list of integers ({err})"
                ) from None
        out.append(cell)
    return out


class StreamingTokenizedRowsDataset(IterableDataset):
    """Packed bins of streamed tokenized rows, each rank x worker reading its own part."""

    def __init__(
        self,
        sources: Any,
        *,
        sample_packing_sequence_len: int,
        rank: int = 0,
        world_size: int = 1,
        vocab_size: int | None = None,
        ring_multiple: int = 1,
        cache_dir: str | None = None,
    ) -> None:
        self.sources = _as_sources(sources)
        self.extra_columns = _extras(self.sources)
        self.capacity = _positive("sample_packing_sequence_len", sample_packing_sequence_len, 1)
        check_sequence_len(self.capacity)
        self.ring_multiple = check_ring_multiple(ring_multiple, self.capacity)
        self.world_size = _positive("world_size", world_size, 1)
        self.rank = _positive("rank", rank, 0)
        if self.rank >= self.world_size:
            raise ConfigError(f"rank {rank} must be below world_size {world_size}")
        self.vocab_size = None if vocab_size is None else _positive("vocab_size", vocab_size, 1)
        self.cache_dir = cache_dir
        self._resume: dict[str, Any] = {"num_streams": None, "streams": {}, "worker_shift": 0}
        # Opening every source once here fails early (a typo, a missing column, no backend)
        # instead of inside a DataLoader worker.
        for source in self.sources:
            open_stream(source, cache_dir=cache_dir)

    # -- resume ----------------------------------------------------------------------------------
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from ``{"num_streams": G, "streams": {g: [source, rows]}, "worker_shift": s}``
        (what ``StatefulLoader`` records; see the module docstring)."""
        allowed = {"num_streams", "streams", "worker_shift", "complete"}
        total, parsed, shift = parse_stream_state(state, allowed, ("source", "rows"))
        for stream, (source, _) in parsed.items():
            if source >= len(self.sources):
                raise ConfigError(
                    f"resume state: stream {stream} is in source {source}, and there are "
                    f"{len(self.sources)} sources; resume with the sources that saved it"
                )
        self._resume = {"num_streams": total, "streams": parsed, "worker_shift": shift}

    def state_dict(self) -> dict[str, Any]:
        """The resume point this dataset was given (the start when none)."""
        return {
            "num_streams": self._resume["num_streams"],
            "streams": {g: list(p) for g, p in self._resume["streams"].items()},
            "worker_shift": self._resume["worker_shift"],
        }

    def _stream(self) -> tuple[int, int]:
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        # The loader's DataLoader restarts at worker 0 after a resume; worker w reads what
        # worker (w + shift) % workers would have read next in the uninterrupted run.
        worker = (worker + self._resume["worker_shift"]) % workers
        return self.rank * workers + worker, self.world_size * workers

    def stream_start(self, stream: int, total: int) -> tuple[int, int]:
        recorded = self._resume["num_streams"]
        if recorded is None:
            return 0, 0
        if recorded != total:
            raise ConfigError(
                f"this resume state was saved with {recorded} streams (ranks x workers) and this "
                f"run has {total}: a tokenized-row stream resumes only with the same world_size "
                "and num_workers (the split into streams decides which rows each one holds)"
            )
        return self._resume["streams"].get(stream, (0, 0))

    # -- reading -----------------------------------------------------------------------------------
    def _rows(self, stream: int, total: int) -> Iterator[tuple[dict[str, np.ndarray], int, int]]:
        """This stream's rows, checked and truncated, each with the resume point after it
        (source index, rows of that source consumed)."""
        from datasets.distributed import split_dataset_by_node  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

        first_source, skip = self.stream_start(stream, total)
        columns = [*REQUIRED_COLUMNS, *self.extra_columns]
        for index in range(first_source, len(self.sources)):
            source = self.sources[index]
            dataset = split_dataset_by_node(
                open_stream(source, cache_dir=self.cache_dir), rank=stream, world_size=total
            )
            done = skip if index == first_source else 0
            # The rows consumed before are dropped here, not by ``dataset.skip``: on a source
            # split by rows datasets skips before the split, i.e. the source's first rows, not
            # this stream's (a resumed stream read other streams' rows and skipped its own).
            pending = done
            for batch in dataset.iter(batch_size=_BATCH_ROWS):
                if pending:
                    count = len(next(iter(batch.values())))
                    batch = {c: values[pending:] for c, values in batch.items()}
                    pending = max(0, pending - count)
                    if not next(iter(batch.values())):  # every row of it was consumed
                        continue
                missing = [c for c in columns if c not in batch]
                if missing:
                    raise InputError(
                        f"source {source.label!r}: no column {', '.join(map(repr, missing))} "
                        f"(columns: {', '.join(batch)}); tokenized rows need input_ids and labels"
                    )
                try:
                    table = pa.RecordBatch.from_pydict(
                        {c: _as_list(batch[c], c, source, done) for c in columns}
                    )
                    lengths, _ = check_chunk(table, columns, source, done, self.vocab_size)
                except InputError as err:
                    # The row number counts this stream's rows, not the source's.
                    raise InputError(
                        f"{err} (row numbers count the rows of stream {stream} of {total}, "
                        "this rank and worker's part of the source; read it unstreamed to "
                        "find the row in the file)"
                    ) from err
                flat = {c: np.asarray(table.column(c).flatten().to_numpy(False)) for c in columns}
                ends = np.cumsum(lengths)
                for k, (start, end) in enumerate(
                    zip((ends - lengths).tolist(), ends.tolist(), strict=True)
                ):
                    stop = (
                        end if source.max_seq_len is None else min(end, start + source.max_seq_len)
                    )
                    row = {c: flat[c][start:stop] for c in columns}
                    yield row, index, done + k + 1
                done += len(lengths)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        stream, total = self._stream()
        columns = (*REQUIRED_COLUMNS, *self.extra_columns)
        parts: list[dict[str, np.ndarray]] = []
        used = 0
        resume = (0, 0)
        for row, index, after in self._rows(stream, total):
            size = int(padded_length(row["input_ids"].shape[0], self.ring_multiple))
            if size > self.capacity:
                raise InputError(
                    f"source {self.sources[index].label!r}: row {after - 1} of stream {stream} "
                    f"of {total} takes {size} tokens (padded to a multiple of "
                    f"{self.ring_multiple}), more than sample_packing_sequence_len="
                    f"{self.capacity}; set max_seq_len <= {self.capacity} on the source"
                )
            if used + size > self.capacity:
                yield self._item(parts, columns, stream, resume)
                parts, used = [], 0
            parts.append(row)
            used += size
            resume = (index, after)
        if parts:
            yield self._item(parts, columns, stream, resume)

    def _item(
        self,
        parts: list[dict[str, np.ndarray]],
        columns: tuple[str, ...],
        stream: int,
        resume: tuple[int, int],
    ) -> dict[str, torch.Tensor]:
        item = assemble_item(
            parts, self.capacity, packed=True, columns=columns, multiple=self.ring_multiple
        )
        for key, value in zip(STREAM_KEYS, (stream, *resume), strict=True):
            item[key] = torch.tensor(value, dtype=torch.int64)
        return item

    # -- identity and report -------------------------------------------------------------------
    def fingerprint(self) -> str:
        """The sources' options and every option that changes the items; not the topology,
        and not the rows themselves (a stream is not read to start)."""
        record = {
            "version": _VERSION,
            "sources": [s.options() for s in self.sources],
            "sequence_len": self.capacity,
            "ring_multiple": self.ring_multiple,
            "vocab_size": self.vocab_size,
        }
        text = json.dumps(record, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def summary(self) -> dict[str, Any]:
        return {
            "kind": "tokenized_rows_stream",
            "sources": [s.label for s in self.sources],
            "columns": [*REQUIRED_COLUMNS, *self.extra_columns],
            "sample_packing_method": "sequential",
            "sample_packing_sequence_len": self.capacity,
            "ring_multiple": self.ring_multiple,
            "streaming": True,
            "rank": self.rank,
            "world_size": self.world_size,
            "resume": self.state_dict(),
        }
