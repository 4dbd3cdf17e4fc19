"""Text sources read through Hugging Face ``datasets``: KempnerForge's ``HuggingFaceDataset``
(eager) and ``StreamingHuggingFaceDataset`` (on the fly), tokenized by data_io's Rust encoder.

Where the text can be (``resolve_text_source``, shared by both classes):

* a local file, the format from its extension (``.jsonl .json .parquet .csv .txt``, optionally
  compressed ``.gz .bz2 .xz .zst``); ``.txt`` gives one row per line in the field ``text``;
* a folder written by ``save_to_disk`` (it holds ``state.json`` or ``dataset_dict.json``),
  opened with ``load_from_disk``;
* any other folder, e.g. a local ``hf download ORG/NAME --repo-type dataset --local-dir DIR``
  copy: read by ``datasets.load_dataset(DIR, config, split=...)``, which understands the Hub repo
  layout (``data/train-*.parquet``, README configs) without a network;
* otherwise a Hub id, read by ``datasets.load_dataset(name, config, split=..., streaming=...)``.
  When the Hub cannot be reached or does not know the id, the error says how to use a local copy.

Every row becomes one document: the encoder's ids of the row's ``text_field``, then the EOS id.
Special-token strings inside a text are encoded as plain text, so the only EOS in the stream are
the document ends. ``eos_token_id`` may be an id or a token string; None takes the tokenizer's
(see ``TextEncoder.eos_id_for``).

``HuggingFaceDataset`` tokenizes every row once into flat ``.npy`` shards (formats.md §6) in a
cache folder keyed by the dataset's identity, the tokenizer file's hash, ``text_field`` and the
EOS id, and then serves ``MemoryMappedDataset`` windows over that folder. ``seq_len`` and the
packing options do not change the shards, so they are not in the key: one cache serves them all.

``StreamingHuggingFaceDataset`` is sharded over ranks and DataLoader workers by rows: stream
``g = rank * num_workers + worker_id`` of ``G = world_size * num_workers`` reads the rows ``i``
(numbered in the source's order from 0) with ``i % G == g``, concatenates their documents and
cuts windows of ``seq_len`` tokens; the stream's last partial window is dropped. Rows rather
than whole HF shards, so that a row's number means the same under any topology and a resume
state can be carried to another one. The cost: each stream parses the whole source and keeps
1/G of the rows (it tokenizes only its own).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from data_io.errors import ConfigError, InputError
from data_io.formats.text_sources import TextSource, load_failed, resolve_text_source
from data_io.load.dataset_state import MapDatasetState
from data_io.load.datasets.shards import MemoryMappedDataset, _require_int, pack_window
from data_io.load.stream_state import STREAM_KEYS, parse_stream_state
from data_io.tokenizer.encoder import TextEncoder
from data_io.util.arrow_strings import is_text_type
from data_io.util.cache import cache_root
from data_io.util.console import on_terminal, reader_errors_unlogged
from data_io.util.fs import publish_mode
from data_io.util.json_kinds import json_kind
from data_io.util.stale import remove_dead_siblings, temporary_prefix

__all__ = [
    "STREAM_KEYS",
    "HuggingFaceDataset",
    "StreamingHuggingFaceDataset",
    "TextSource",
    "resolve_text_source",
]

# Bumped when the cache folder's content changes meaning: old folders are then not reused.
_CACHE_FORMAT = 1
_CACHE_RECORD = "hf_text_cache.json"
# Rows per call of the encoder (it encodes a batch in parallel) and tokens per cached shard.
_EAGER_BATCH_ROWS = 1024
_STREAM_BATCH_ROWS = 256
_SHARD_TOKENS = 1 << 26


# -- rows to documents ------------------------------------------------------------------------
def _texts(
    batch: pa.Table,
    field: str,
    first_row: int,
    source: TextSource,
    start: int = 0,
    stride: int = 1,
) -> pa.ChunkedArray:
    """The ``field`` of rows ``start, start + stride, ...`` of ``batch`` (consecutive rows of a
    stream, the first numbered ``first_row``), as the Arrow strings the encoder reads in place
    (taken first when ``stride`` > 1). A row without text is an error naming the row (its number
    in the source) and the fields rows do have."""
    column = batch.column(field)
    if stride > 1 or start:
        column = column.take(np.arange(start, len(column), stride))
    if not is_text_type(column.type):
        k, value = _first_not_text(column)
        what = "no text" if value is None else json_kind(value)
        raise _bad_row(source, first_row + start + k * stride, what, field, batch)
    if column.null_count:
        k = pc.index(column.is_null(), True).as_py()
        raise _bad_row(source, first_row + start + k * stride, "no text", field, batch)
    return column


def _first_not_text(column: pa.ChunkedArray) -> tuple[int, Any]:
    """The first value of a column that is not typed as text and what it holds: a Json column
    (``datasets`` types one of mixed values so) keeps each value as JSON text."""
    json_text = getattr(column.type, "extension_name", "") == "arrow.json"
    for k, value in enumerate(column.to_pylist()):
        if json_text and value is not None:
            value = json.loads(value)
        if not isinstance(value, str):
            return k, value
    return 0, None  # not reached: a column of only strings is typed as text


def _row_name(row: int) -> str:
    """A row as the messages name it: its place in the split, counted from 0 (a local JSONL
    file's line numbers differ by one, and by any blank lines)."""
    return f"row {row} (counted from 0)"


def _bad_row(source: TextSource, row: int, what: str, field: str, batch: pa.Table) -> InputError:
    return InputError(
        f"{source.label}: {_row_name(row)} has {what} in field {field!r}, not a string (the rows have "
        f"the fields {', '.join(map(str, batch.column_names)) or 'none'}); pass text_field= the "
        "field holding the text, or fix the row"
    )


def _encode(
    encoder: TextEncoder,
    texts: pa.ChunkedArray,
    eos_id: int,
    source: TextSource,
    rows: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """The ids of ``texts``: rows ``first, first + stride, ...`` of ``source`` (``rows``)."""
    try:
        return encoder.encode_batch(texts, eos_id)
    except InputError as err:
        first, stride = rows
        bad = _invalid_utf8(texts)
        if bad is not None:  # the Arrow data holds bytes that are no UTF-8 (a reader let them by)
            k, at = bad
            raise InputError(
                f"{source.label}: {_row_name(first + k * stride)}: its text holds invalid UTF-8 "
                f"at byte {at}; decode the data with its right encoding first, or replace the "
                "bad bytes"
            ) from err
        last = first + (len(texts) - 1) * stride
        every = f" every {stride}" if stride > 1 else ""
        raise InputError(f"{source.label}: rows {first}..{last}{every}: {err}") from err


def _invalid_utf8(texts: pa.ChunkedArray) -> tuple[int, int] | None:
    """The first text that is not valid UTF-8, and the byte where it goes wrong (only after the
    encoder refused the batch: this reads every text in Python)."""
    k = 0
    for chunk in texts.chunks:
        try:
            values = chunk.cast(pa.large_binary()).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # a type that will not cast
            return None
        for raw in values:
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                return k, err.start
            k += 1
    return None


def _check_columns(dataset: Any, field: str, source: TextSource) -> None:
    """Fail before any tokenization when the dataset's columns are known and lack ``field``."""
    columns = getattr(dataset, "column_names", None)
    if columns is not None and field not in columns:
        raise InputError(
            f"{source.label}: no field {field!r} (the rows have {', '.join(columns) or 'none'}); "
            "pass text_field= the field holding the text"
        )


def _check_options(
    seq_len: int,
    text_field: str,
    pack_sequences: bool,
    position_ids: bool,
    cu_seqlens: bool,
) -> int:
    seq_len = _require_int(
        "seq_len", seq_len, 2, "a window of context + 1 tokens, the +1 for the label shift"
    )
    if not isinstance(text_field, str) or not text_field:
        raise ConfigError(f"text_field must be a non-empty string, got {text_field!r}")
    if (position_ids or cu_seqlens) and not pack_sequences:
        raise ConfigError(
            "position_ids and cu_seqlens describe packed documents; pass pack_sequences=True"
        )
    return seq_len


def _digest(value: Any) -> str:
    return hashlib.blake2b(
        json.dumps(value, sort_keys=True, default=str).encode(), digest_size=16
    ).hexdigest()


def _file_digest(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# -- eager: tokenize once into a shard cache --------------------------------------------------
def default_cache_dir() -> Path:
    return cache_root() / "hf_text"


class _ShardWriter:
    """Flat token shards of at most ``_SHARD_TOKENS`` tokens, written as ``.npy`` in ``folder``."""

    def __init__(self, folder: Path, dtype: np.dtype) -> None:
        self.folder = folder
        self.dtype = dtype
        self.shards: list[dict[str, Any]] = []
        self._pending: list[np.ndarray] = []
        self._pending_tokens = 0

    def add(self, ids: np.ndarray) -> None:
        self._pending.append(ids.astype(self.dtype, copy=False))
        self._pending_tokens += len(ids)
        if self._pending_tokens >= _SHARD_TOKENS:
            self.flush()

    def flush(self) -> None:
        if not self._pending_tokens:
            return
        name = f"shard_{len(self.shards):05d}.npy"
        np.save(self.folder / name, np.concatenate(self._pending), allow_pickle=False)
        self.shards.append({"file": name, "tokens": self._pending_tokens})
        self._pending, self._pending_tokens = [], 0


def _cache_is_complete(folder: Path, key: str) -> bool:
    """True when ``folder`` holds a finished cache for ``key`` with all its shards intact."""
    try:
        record = json.loads((folder / _CACHE_RECORD).read_text(encoding="utf-8"))
        shards = record["shards"]
        if record.get("key") != key or not shards:
            return False
        itemsize = np.dtype(record["dtype"]).itemsize
        # A shard's size is its header plus its tokens; a shorter file was damaged.
        return all((folder / s["file"]).stat().st_size >= s["tokens"] * itemsize for s in shards)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _publish(built: Path, folder: Path, key: str) -> None:
    """Rename the finished ``built`` folder to ``folder``; another process (a second rank on
    this node) may have published the same cache meanwhile, and then ours is discarded."""
    if folder.exists() and not _cache_is_complete(folder, key):
        stale = folder.with_name(f".{folder.name}.stale-{os.getpid()}")
        os.replace(folder, stale)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.replace(built, folder)
    except OSError:
        if not _cache_is_complete(folder, key):
            raise
        shutil.rmtree(built, ignore_errors=True)


class HuggingFaceDataset(MapDatasetState, Dataset):
    """Map-style windows over a text dataset tokenized once into cached flat shards."""

    def __init__(
        self,
        dataset_name: str,
        seq_len: int,
        tokenizer_path: str | Path,
        split: str = "train",
        text_field: str = "text",
        dataset_config: str | None = None,
        eos_token_id: int | str | None = None,
        pack_sequences: bool = False,
        position_ids: bool = False,
        cu_seqlens: bool = False,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.seq_len = _check_options(seq_len, text_field, pack_sequences, position_ids, cu_seqlens)
        self.text_field = text_field
        self.source = resolve_text_source(dataset_name, split, dataset_config)
        encoder = TextEncoder(tokenizer_path)
        self.eos_token_id = encoder.eos_id_for(eos_token_id)
        dataset = None
        identity = self.source.identity()
        if self.source.kind == "hub":
            # The datasets fingerprint pins the downloaded revision: a new upload re-tokenizes.
            dataset = self.source.load(streaming=False)
            identity["fingerprint"] = getattr(dataset, "_fingerprint", None)
        self.key = _digest(
            {
                "format": _CACHE_FORMAT,
                "source": identity,
                "tokenizer": _file_digest(encoder.path),
                "text_field": text_field,
                "eos_token_id": self.eos_token_id,
            }
        )
        root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        slug = re.sub(r"[^\w.-]+", "_", Path(self.source.name).name or "dataset")
        self.cache_folder = root / f"{slug}-{self.key[:16]}"
        self.reused = _cache_is_complete(self.cache_folder, self.key)
        if not self.reused:
            if dataset is None:
                # Local files are read as a stream: no second copy in the datasets cache (a
                # saved dataset is memory-mapped Arrow already).
                dataset = self.source.load(streaming=self.source.kind != "saved")
            self._build(dataset, encoder, root)
        self.record = json.loads((self.cache_folder / _CACHE_RECORD).read_text(encoding="utf-8"))
        self._windows = MemoryMappedDataset(
            self.cache_folder,
            self.seq_len,
            "*.npy",
            pack_sequences=pack_sequences,
            eos_token_id=self.eos_token_id,
            position_ids=position_ids,
            cu_seqlens=cu_seqlens,
        )

    def _build(self, dataset: Any, encoder: TextEncoder, root: Path) -> None:
        """Tokenize every row into shards in a temporary folder, then rename it into place."""
        root.mkdir(parents=True, exist_ok=True)
        # A killed build leaves its folder (the whole tokenized source): removed here, once
        # its process is gone; the pid in the name tells.
        remove_dead_siblings(root, self.cache_folder.name, "tokenization cache")
        building = Path(tempfile.mkdtemp(prefix=temporary_prefix(self.cache_folder.name), dir=root))
        publish_mode(building)
        try:
            dtype = np.dtype(np.uint16 if encoder.vocab_size <= 1 << 16 else np.uint32)
            writer = _ShardWriter(building, dtype)
            rows = self._tokenize(dataset, encoder, writer)
            writer.flush()
            record = {
                "format": _CACHE_FORMAT,
                "key": self.key,
                "source": self.source.identity(),
                "tokenizer_path": str(encoder.path),
                "vocab_size": encoder.vocab_size,
                "text_field": self.text_field,
                "eos_token_id": self.eos_token_id,
                "dtype": dtype.name,
                "rows": rows,
                "tokens": sum(s["tokens"] for s in writer.shards),
                "shards": writer.shards,
            }
            (building / _CACHE_RECORD).write_text(json.dumps(record, indent=1), encoding="utf-8")
            _publish(building, self.cache_folder, self.key)
        finally:
            shutil.rmtree(building, ignore_errors=True)

    def _tokenize(self, dataset: Any, encoder: TextEncoder, writer: _ShardWriter) -> int:
        from tqdm.auto import tqdm  # noqa: PLC0415  CLI start-up: tqdm, only when a bar is shown

        _check_columns(dataset, self.text_field, self.source)
        total = len(dataset) if hasattr(dataset, "__len__") else None
        rows = 0
        batches = _column_batches(dataset, _EAGER_BATCH_ROWS, self.source)
        bar = tqdm(
            total=total,
            unit="rows",
            desc=f"tokenizing {self.source.name}",
            disable=not on_terminal(),  # a log file gets no bar
        )
        with bar:
            for batch in batches:
                # Columns unknown up front (a JSON stream): checked here.
                _check_columns(_Columns(batch.column_names), self.text_field, self.source)
                texts = _texts(batch, self.text_field, rows, self.source)
                ids, _ = _encode(encoder, texts, self.eos_token_id, self.source, (rows, 1))
                writer.add(ids)
                rows += len(texts)
                bar.update(len(texts))
        if rows == 0:
            raise InputError(f"{self.source.label} holds no rows; pass a dataset with text")
        return rows

    def __len__(self) -> int:
        return len(self._windows)

    def __getitem__(self, idx: int) -> dict[str, torch.Tensor]:
        return self._windows[idx]

    # Whole batches, and a shared batch with shard sources of a mixture (see batching).
    def get_batch(self, indices: Any) -> dict[str, torch.Tensor]:
        return self._windows.get_batch(indices)

    def read_rows(self, *args: Any) -> None:
        self._windows.read_rows(*args)

    def batch_options(self) -> tuple[Any, ...]:
        return self._windows.batch_options()

    def finish_batch(self, inputs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return self._windows.finish_batch(inputs, labels)

    def fingerprint(self) -> str:
        """The cache key (data, tokenizer, text_field, EOS) and the window options."""
        return _digest([self.key, self._windows.fingerprint()])

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source.name,
            "kind": self.source.kind,
            "split": self.source.split,
            "config": self.source.config,
            "text_field": self.text_field,
            "eos_token_id": self.eos_token_id,
            "cache_folder": str(self.cache_folder),
            "cache_reused": self.reused,
            "rows": self.record["rows"],
            **{k: v for k, v in self._windows.summary().items() if k != "data_dir"},
        }


@dataclass(frozen=True)
class _Columns:
    column_names: list[str]


def _read(items: Iterator[Any], size: int, source: TextSource) -> list[Any]:
    """Up to ``size`` items; read errors (a malformed line found mid-stream) name the source
    instead of surfacing as a datasets or pyarrow internal."""
    try:
        with reader_errors_unlogged():  # raised and named below, not logged as well
            return list(itertools.islice(items, size))
    except InputError:
        raise
    except Exception as err:  # parse errors of any builder
        raise load_failed(source, err) from err


def _column_batches(dataset: Any, size: int, source: TextSource) -> Iterator[pa.Table]:
    """Batches as Arrow tables: no Python object per row or text; the encoder reads the text
    column's buffers where they are."""
    batches = iter(dataset.with_format("arrow").iter(batch_size=size))
    while batch := _read(batches, 1, source):
        yield batch[0]


# -- streaming ----------------------------------------------------------------------------------
class _StreamCutter:
    """Cuts one stream's documents into ``seq_len`` windows and says where each leaves off.

    Holds the tokens not yet emitted and, for each (partial) row in them, its global row number
    and where it starts, so "resume after this window" is a (row, tokens-to-skip) pair.
    """

    def __init__(self, seq_len: int, stride: int, first_row: int, skip: int) -> None:
        self.seq_len = seq_len
        self.stride = stride
        self.tokens = np.empty(0, dtype=np.uint32)
        self.rows = np.empty(0, dtype=np.int64)  # global row of each segment of ``tokens``
        self.starts = np.empty(0, dtype=np.int64)  # where each segment starts in ``tokens``
        self.head_skipped = skip  # tokens of rows[0] consumed before tokens[0]
        self.next_row = first_row  # the row after the last one added
        self._skip_pending = skip

    def add(
        self, first_row: int, ids: np.ndarray, offsets: np.ndarray, source: TextSource
    ) -> list[tuple[np.ndarray, int, int]]:
        """Append documents of rows ``first_row, first_row + stride, ...``; returns the full
        windows now available as (tokens, resume row, resume offset)."""
        if self._skip_pending:
            first_len = int(offsets[1] - offsets[0])
            if self._skip_pending >= first_len:
                raise InputError(
                    f"{source.label}: the resume state skips {self._skip_pending} tokens of row "
                    f"{first_row}, which has only {first_len}; the data or tokenizer changed "
                    "since the state was saved: resume with the same inputs or start afresh"
                )
            ids = ids[self._skip_pending :]
            offsets = offsets - self._skip_pending
            offsets[0] = 0
            self._skip_pending = 0
        count = len(offsets) - 1
        self.starts = np.concatenate((self.starts, len(self.tokens) + offsets[:-1]))
        self.rows = np.concatenate(
            (self.rows, first_row + self.stride * np.arange(count, dtype=np.int64))
        )
        self.tokens = np.concatenate((self.tokens, ids))
        self.next_row = first_row + self.stride * count
        return self._cut()

    def _resume_points(self, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, offset) of the first token not yet used after each window end."""
        segment = np.searchsorted(self.starts, ends, side="right") - 1
        rows = self.rows[segment]
        offsets = ends - self.starts[segment] + np.where(segment == 0, self.head_skipped, 0)
        at_end = ends == len(self.tokens)  # nothing left: the stream goes on at its next row
        return np.where(at_end, self.next_row, rows), np.where(at_end, 0, offsets)

    def _cut(self) -> list[tuple[np.ndarray, int, int]]:
        count = len(self.tokens) // self.seq_len
        if count == 0:
            return []
        used = count * self.seq_len
        ends = self.seq_len * np.arange(1, count + 1, dtype=np.int64)
        rows, offsets = self._resume_points(ends)
        windows = self.tokens[:used].reshape(count, self.seq_len)
        out = [(windows[k], int(rows[k]), int(offsets[k])) for k in range(count)]
        if used == len(self.tokens):
            self.tokens = self.tokens[:0]
            self.rows, self.starts = self.rows[:0], self.starts[:0]
            self.head_skipped = 0
        else:
            segment = int(np.searchsorted(self.starts, used, side="right")) - 1
            self.head_skipped = int(offsets[-1])
            self.rows = self.rows[segment:]
            self.starts = np.maximum(self.starts[segment:] - used, 0)
            self.tokens = self.tokens[used:]
        return out


def _parse_resume(state: Mapping[str, Any]) -> tuple[int | None, dict[int, tuple[int, int]], int]:
    """Validate a resume state ``{"num_streams": G, "streams": {g: [row, offset]}}``."""
    allowed = {"num_streams", "streams", "fingerprint", "worker_shift", "complete"}
    total, parsed, shift = parse_stream_state(state, allowed, ("row", "offset"))
    for stream, (row, _) in parsed.items():
        assert total is not None  # streams need num_streams (parse_stream_state)
        if row % total != stream:
            raise ConfigError(
                f"resume state: row {row} does not belong to stream {stream} of {total} "
                f"(stream g reads rows i with i % {total} == g); the state is damaged"
            )
    return total, parsed, shift


class StreamingHuggingFaceDataset(IterableDataset):
    """Windows tokenized on the fly, each rank x worker reading its own rows; resumable."""

    def __init__(
        self,
        dataset_name: str,
        seq_len: int,
        tokenizer_path: str | Path,
        split: str = "train",
        text_field: str = "text",
        dataset_config: str | None = None,
        eos_token_id: int | str | None = None,
        pack_sequences: bool = False,
        position_ids: bool = False,
        cu_seqlens: bool = False,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        self.seq_len = _check_options(seq_len, text_field, pack_sequences, position_ids, cu_seqlens)
        self.world_size = _require_int("world_size", world_size, 1, "number of ranks")
        self.rank = _require_int("rank", rank, 0, "this process's rank")
        if self.rank >= self.world_size:
            raise ConfigError(f"rank {rank} must be below world_size {world_size}")
        self.text_field = text_field
        self.pack_sequences = pack_sequences
        self.position_ids = position_ids
        self.cu_seqlens = cu_seqlens
        self.source = resolve_text_source(dataset_name, split, dataset_config)
        self.encoder = TextEncoder(tokenizer_path)  # pickles as its path
        self.eos_token_id = self.encoder.eos_id_for(eos_token_id)
        self._tokenizer_digest = _file_digest(self.encoder.path)
        self._resume: dict[str, Any] = {
            "num_streams": None,
            "streams": {},
            "worker_shift": 0,
            "complete": False,
        }

    # The resume point: set in the main process, carried to workers by pickling.
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from ``{"num_streams": G, "streams": {g: [row, offset], ...}}``.

        Same G: each stream resumes exactly where its entry says (a stream without an entry
        starts at its beginning); ``worker_shift`` rotates which worker reads which stream.
        Another G needs every stream's entry (``complete``, from ``merge_states``): every
        stream restarts at the smallest row any stream had not finished, so rows may be read
        twice but none is skipped.
        """
        fingerprint = state.get("fingerprint") if isinstance(state, Mapping) else None
        if fingerprint is not None and fingerprint != self.fingerprint():
            raise ConfigError(
                "the resume state was saved for another dataset or options (fingerprint "
                f"{fingerprint}, this dataset {self.fingerprint()}); resume with the same "
                "source, tokenizer and options, or start afresh"
            )
        total, streams, shift = _parse_resume(state)
        self._resume = {
            "num_streams": total,
            "streams": {g: list(pos) for g, pos in sorted(streams.items())},
            # The loader's DataLoader restarts at worker 0; worker w reads what worker
            # (w + shift) % workers would have read next in the uninterrupted run.
            "worker_shift": shift,
            # True when the streams come from every rank (StatefulLoader.merge_states).
            "complete": bool(state.get("complete", False)),
        }

    def state_dict(self) -> dict[str, Any]:
        """The resume point this dataset was given (the start when none)."""
        return {
            "num_streams": self._resume["num_streams"],
            "streams": {g: list(pos) for g, pos in self._resume["streams"].items()},
            "worker_shift": self._resume["worker_shift"],
            "complete": self._resume["complete"],
        }

    def _stream(self) -> tuple[int, int]:
        info = get_worker_info()
        workers, worker = (info.num_workers, info.id) if info is not None else (1, 0)
        worker = (worker + self._resume.get("worker_shift", 0)) % workers
        return self.rank * workers + worker, self.world_size * workers

    def stream_start(self, stream: int, total: int) -> tuple[int, int]:
        """First row (global number) and tokens to skip in it, for ``stream`` of ``total``."""
        recorded, streams = self._resume["num_streams"], self._resume["streams"]
        if recorded is None:
            return stream, 0
        if recorded == total:
            row, offset = streams.get(stream, (stream, 0))
            return row, offset
        if not self._resume.get("complete"):
            raise ConfigError(
                f"this resume state holds {len(streams)} of the {recorded} streams of one "
                f"topology, and this run has {total}: merge every rank's state "
                "(StatefulLoader.merge_states) before resuming with another topology"
            )
        # A stream without an entry has read nothing: its next row is its own number.
        unread = [g for g in range(recorded) if g not in streams]
        low = min([row for row, _ in streams.values()] + unread)
        return low + (stream - low) % total, 0

    def _rows(self, stream: int, first: int, stride: int) -> Iterator[tuple[int, pa.ChunkedArray]]:
        """Batches of this stream's texts: (global number of the batch's first row, values).

        Read with ``IterableDataset.iter``, which (unlike iterating the dataset) does not split
        the data over DataLoader workers by itself: the split is ours, by row number.
        """
        dataset = self.source.load(streaming=True)
        _check_columns(dataset, self.text_field, self.source)
        if first:
            dataset = dataset.skip(first)
        number = first  # global number of the batch's first row
        for batch in _column_batches(dataset, _STREAM_BATCH_ROWS * stride, self.source):
            # Columns unknown up front (a JSON stream): checked here.
            _check_columns(_Columns(batch.column_names), self.text_field, self.source)
            start = (stream - number) % stride
            if start < batch.num_rows:
                texts = _texts(batch, self.text_field, number, self.source, start, stride)
                yield number + start, texts
            number += batch.num_rows

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        stream, total = self._stream()
        first, skip = self.stream_start(stream, total)
        cutter = _StreamCutter(self.seq_len, total, first, skip)
        for number, texts in self._rows(stream, first, total):
            ids, offsets = _encode(
                self.encoder, texts, self.eos_token_id, self.source, (number, total)
            )
            for window, row, offset in cutter.add(number, ids, offsets, self.source):
                yield self._sample(window, stream, row, offset)

    def _sample(self, window: np.ndarray, stream: int, row: int, offset: int) -> dict[str, Any]:
        tokens = window.astype(np.int64)
        if self.pack_sequences:
            sample = pack_window(
                tokens,
                self.eos_token_id,
                position_ids=self.position_ids,
                cu_seqlens=self.cu_seqlens,
            )
        else:
            sample = {
                "input_ids": torch.from_numpy(tokens[:-1].copy()),
                "labels": torch.from_numpy(tokens[1:].copy()),
            }
        for key, value in zip(STREAM_KEYS, (stream, row, offset), strict=True):
            sample[key] = torch.tensor(value, dtype=torch.int64)
        return sample

    def fingerprint(self) -> str:
        """Data identity, tokenizer hash and every option that changes the windows; not the
        topology (rank, world size, workers), which a resume may change."""
        return _digest(
            {
                "source": self.source.identity(),
                "tokenizer": self._tokenizer_digest,
                "text_field": self.text_field,
                "eos_token_id": self.eos_token_id,
                "seq_len": self.seq_len,
                "pack": [self.pack_sequences, self.position_ids, self.cu_seqlens],
            }
        )

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source.name,
            "kind": self.source.kind,
            "split": self.source.split,
            "config": self.source.config,
            "text_field": self.text_field,
            "eos_token_id": self.eos_token_id,
            "seq_len": self.seq_len,
            "streaming": True,
            "rank": self.rank,
            "world_size": self.world_size,
            "resume": self.state_dict(),
        }
