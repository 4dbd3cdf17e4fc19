"""``TokenizedRowsDataset``: xorl-style tokenized rows as a map-style dataset, packed or not.

Sources (``RowSource``, see ``rows.py``) are concatenated in the given order and shuffled with
``seed`` (``shuffle=False`` keeps the concatenation order). Then, per item:

* unpacked (``sample_packing_method=None``): one row, right-padded to the longest row of the
  dataset after ``max_seq_len`` truncation (one fixed length per dataset, no wider than needed);
* packed (``"sequential"`` or ``"multipack"``, see ``row_packing.py``): one bin of rows back to
  back, padded to ``sample_packing_sequence_len``.

Every item holds ``input_ids`` (padding 0), ``labels`` (aligned with input_ids, the model
shifts; -100 on padding), ``position_ids`` (restarting at 0 per row and for the padding),
``cu_seqlens`` (int32 boundaries of the rows, plus one segment for the padding, so it always ends
at the item length), and every extra selected column (padding 0; float columns as float32, the
rest int64). In a packed item the label of each row's first token is -100: after the model's
shift it would be predicted from the previous row's last token, and it is never used unpacked.

With ``ring_multiple`` m > 1 (xorl's ring attention: m = 2 x ringattn_parallel_size x
ulysses_parallel_size) every row is padded to a multiple of m tokens inside the item (id 0,
label -100, its positions counting on), so every ``cu_seqlens`` boundary is a multiple of m; bins
are planned with the padded lengths (``assemble_item``).

The bin plan, and the per-source statistics, are cached under
``<dataset_prepared_path>/<fingerprint>/`` (``dataset_prepared_path=None``: not cached); with
a cached plan start-up skips the pass over the tokens. The fingerprint covers each source's
datasets fingerprint, its files' sizes and mtimes, and every option that changes items.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import torch
from torch.utils.data import Dataset

from data_io.errors import ConfigError, InputError
from data_io.load.dataset_state import MapDatasetState
from data_io.load.datasets.row_checks import check_rows
from data_io.load.datasets.row_sources import (
    REQUIRED_COLUMNS,
    RowSource,
    open_source,
    source_fingerprint,
)
from data_io.load.packing.layouts import IGNORE_INDEX, PAD_ID
from data_io.load.packing.row_bins import (
    METHODS,
    BinPlan,
    check_sequence_len,
    plan_bins,
    prepare_plan,
)
from data_io.util.cache import cache_root

__all__ = [
    "TokenizedRowsDataset",
    "assemble_item",
    "default_prepared_path",
    "padded_length",
]

_FINGERPRINT_VERSION = 1
# "" stands for the user's cache folder (default_prepared_path); None for no cache at all.
DEFAULT_PREPARED_PATH = ""
PREPARED_SUBDIR = "prepared_rows"


def default_prepared_path() -> Path:
    """Where bin plans are cached when no ``dataset_prepared_path`` is given: under the user's
    cache folder, ``$XDG_CACHE_HOME/data_io/prepared_rows`` (``~/.cache/data_io/...``), never
    the current folder (xorl's ``last_prepared_dataset`` there is one explicit path away)."""
    return cache_root() / PREPARED_SUBDIR


# Keys of xorl's ``data:`` section that this dataset reads.
_DATA_KEYS = (
    "datasets",
    "sample_packing_method",
    "sample_packing_sequence_len",
    "dataset_prepared_path",
    "select_columns",
    "seed",
    "shuffle",
)


def padded_length(lengths: Any, multiple: int) -> Any:
    """``lengths`` rounded up to a multiple of ``multiple`` (ring attention's constraint)."""
    return -(-np.asarray(lengths, dtype=np.int64) // multiple) * multiple


def check_ring_multiple(multiple: Any, capacity: int | None) -> int:
    """``multiple`` (2 x ring x ulysses, or 1), checked, and the bin length against it."""
    if isinstance(multiple, bool) or not isinstance(multiple, (int, np.integer)) or multiple < 1:
        raise ConfigError(f"ring_multiple must be a positive integer, got {multiple!r}")
    if capacity is not None and capacity % multiple:
        raise ConfigError(
            f"sample_packing_sequence_len={capacity} is not a multiple of {multiple} (2 x "
            "ringattn_parallel_size x ulysses_parallel_size): ring attention splits every "
            f"document and the bin into {multiple} equal chunks; use a multiple of {multiple}"
        )
    return int(multiple)


def assemble_item(
    parts: list[dict[str, np.ndarray]],
    width: int,
    *,
    packed: bool,
    columns: tuple[str, ...],
    multiple: int = 1,
    overflow: Any = None,
) -> dict[str, torch.Tensor]:
    """One item from its rows (already truncated), ``width`` tokens long.

    Each row is a segment of its own. With ``multiple > 1`` (ring attention) a row's segment is
    its length rounded up to a multiple: the pad tokens are id 0 with label -100 and belong to
    that row's segment, so its positions keep counting (0 .. padded - 1) and ``cu_seqlens``
    falls on multiples, as a ring/ulysses split of each document needs. What is left of the
    item after the rows is one more segment (positions from 0). ``overflow(used)`` is raised
    when the rows do not fit ``width``.
    """
    lens = np.array([p["input_ids"].shape[0] for p in parts], dtype=np.int64)
    seg_lens = padded_length(lens, multiple)
    used = int(seg_lens.sum())
    if used > width:
        raise overflow(used) if overflow is not None else ValueError(f"{used} > {width} tokens")
    starts = np.cumsum(seg_lens) - seg_lens
    # Where each real token goes in the item: its row's start plus its place in the row; without
    # ring padding the rows are simply one after another (the usual case, kept cheap).
    where: Any = slice(0, used)
    if multiple > 1:
        where = np.repeat(starts, lens) + (
            np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
        )
    item = {}
    for column in columns:
        values = np.concatenate([p[column] for p in parts])
        dtype = np.float32 if values.dtype.kind == "f" else np.int64
        fill = IGNORE_INDEX if column == "labels" else PAD_ID
        padded = np.full(width, fill, dtype=dtype)
        padded[where] = values
        item[column] = padded
    if packed:
        item["labels"][starts] = IGNORE_INDEX  # see the module docstring
    bounds = np.append(starts, used)
    if used < width:
        bounds = np.append(bounds, width)  # the rest is a segment of its own
    segments = np.diff(bounds)
    item["position_ids"] = np.arange(width, dtype=np.int64) - np.repeat(bounds[:-1], segments)
    item["cu_seqlens"] = bounds.astype(np.int32)
    return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in item.items()}


def _as_sources(sources: Any) -> list[RowSource]:
    if isinstance(sources, (RowSource, str, Mapping)):
        sources = [sources]
    if not isinstance(sources, Iterable):
        raise ConfigError(f"sources must be a list of RowSource or mappings, got {sources!r}")
    out = [
        s if isinstance(s, RowSource) else RowSource.from_mapping(s, f"datasets[{i}]")
        for i, s in enumerate(sources)
    ]
    if not out:
        raise ConfigError("datasets is empty; give at least one source of tokenized rows")
    return out


def _check_options(method: Any, capacity: Any, seed: Any) -> None:
    if method is not None and method not in METHODS:
        raise ConfigError(
            f"sample_packing_method must be one of {', '.join(METHODS)} or null (no packing), "
            f"got {method!r}"
        )
    if capacity is not None and (
        isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1
    ):
        raise ConfigError(
            f"sample_packing_sequence_len must be a positive integer, got {capacity!r}"
        )
    check_sequence_len(capacity)
    if method is not None and capacity is None:
        raise ConfigError(
            f"sample_packing_method={method!r} needs sample_packing_sequence_len (the bin length)"
        )
    if method is None and capacity is not None:
        raise ConfigError(
            "sample_packing_sequence_len is set but sample_packing_method is null; set "
            "sample_packing_method to sequential or multipack, or remove the length"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")


# Where a source's rows are, not what they are: left out of the resume identity. (``name`` is
# the Hub config, which selects other rows: it stays in.)
_WHERE_KEYS = ("path", "data_files", "metrics_name")
# Rows per source whose contents the resume identity hashes (evenly spaced, first and last).
_SAMPLED_ROWS = 64


def _row_sample_digest(dataset: Any, columns: tuple[str, ...]) -> str:
    """A hash of evenly spaced rows' values: other data with the same row lengths differs."""
    n = len(dataset)
    rows = np.unique(np.linspace(0, n - 1, min(n, _SAMPLED_ROWS)).astype(np.int64)) if n else []
    table = dataset.data.table.select(list(columns)).take(pa.array(rows, pa.int64()))
    return hashlib.sha256(json.dumps(table.to_pydict(), default=str).encode()).hexdigest()


def _extras(sources: list[RowSource]) -> tuple[str, ...]:
    """Extra selected columns: the same in every source, since every item has the same keys."""
    chosen = {
        tuple(c for c in (s.select_columns or ()) if c not in REQUIRED_COLUMNS) for s in sources
    }
    if len(chosen) > 1:
        listed = "; ".join(
            f"{s.label}: {list(s.select_columns or REQUIRED_COLUMNS)}" for s in sources
        )
        raise ConfigError(
            f"select_columns differ between sources ({listed}); every item needs the same "
            "columns, so select the same extra columns in every source"
        )
    return chosen.pop()


class TokenizedRowsDataset(MapDatasetState, Dataset):
    """Map-style dataset of tokenized rows; see the module docstring."""

    def __init__(
        self,
        sources: Any,
        *,
        sample_packing_method: str | None = None,
        sample_packing_sequence_len: int | None = None,
        dataset_prepared_path: str | Path | None = DEFAULT_PREPARED_PATH,
        seed: int = 0,
        shuffle: bool = True,
        cache_dir: str | None = None,
        vocab_size: int | None = None,
        ring_multiple: int = 1,
    ) -> None:
        _check_options(sample_packing_method, sample_packing_sequence_len, seed)
        self.ring_multiple = check_ring_multiple(ring_multiple, sample_packing_sequence_len)
        if vocab_size is not None and (
            isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1
        ):
            raise ConfigError(f"vocab_size must be a positive integer, got {vocab_size!r}")
        self.vocab_size = vocab_size
        self.sources = _as_sources(sources)
        self.extra_columns = _extras(self.sources)
        self.method = sample_packing_method
        self.capacity = sample_packing_sequence_len
        self.seed = seed
        self.shuffle = bool(shuffle)
        self._datasets = [open_source(s, cache_dir=cache_dir) for s in self.sources]
        sizes = [len(d) for d in self._datasets]
        self._starts = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        self._fingerprint = self._digest()  # the plan cache's key
        self._identity: str | None = None  # the resume identity (fingerprint())
        if dataset_prepared_path == DEFAULT_PREPARED_PATH:
            dataset_prepared_path = default_prepared_path()
        plan, meta, folder, reused = prepare_plan(
            dataset_prepared_path, self._fingerprint, int(self._starts[-1]), self._build
        )
        self._meta = meta
        self.cache_folder = folder
        self.cache_reused = reused
        self.item_length = int(self.capacity or padded_length(meta["longest"], self.ring_multiple))
        self._plan: BinPlan | None = plan
        self._n_items = len(plan)

    # -- construction -------------------------------------------------------------------------
    def _digest(self) -> str:
        record = {
            "version": _FINGERPRINT_VERSION,
            "sources": [
                source_fingerprint(s, d) for s, d in zip(self.sources, self._datasets, strict=True)
            ],
            "method": self.method,
            "sequence_len": self.capacity,
            "seed": self.seed,
            "shuffle": self.shuffle,
        }
        if self.vocab_size is not None:  # a plan is cached only after its ids were checked
            record["vocab_size"] = self.vocab_size
        if self.ring_multiple > 1:  # (absent when 1: the plans cached before it stay valid)
            record["ring_multiple"] = self.ring_multiple
        return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:20]

    def _describe(self, row: int) -> str:
        source = int(np.searchsorted(self._starts, row, side="right")) - 1
        return f"source {self.sources[source].label!r} row {row - int(self._starts[source])}"

    def _build(self) -> tuple[BinPlan, dict[str, Any]]:
        """Validate every source, then plan the bins (what the cache saves)."""
        checked = [
            check_rows(s, d, self.vocab_size)
            for s, d in zip(self.sources, self._datasets, strict=True)
        ]
        lengths = np.concatenate([c[0] for c in checked])
        n = lengths.shape[0]
        rng = np.random.default_rng([self.seed, 0])
        order = rng.permutation(n) if self.shuffle else np.arange(n, dtype=np.int64)
        # With ring attention a row takes its padded length in a bin.
        padded = padded_length(lengths, self.ring_multiple)
        if self.capacity is not None and self.ring_multiple > 1 and padded.size:
            worst = int(np.argmax(padded))
            if int(padded[worst]) > self.capacity:
                raise InputError(
                    f"{self._describe(worst)} has {int(lengths[worst])} tokens, "
                    f"{int(padded[worst])} once padded to a multiple of {self.ring_multiple} "
                    "(2 x ringattn_parallel_size x ulysses_parallel_size), more than "
                    f"sample_packing_sequence_len={self.capacity}; set max_seq_len <= "
                    f"{self.capacity} on its source, or raise sample_packing_sequence_len"
                )
        plan = plan_bins(self.method, order, padded, self.capacity, self.seed, self._describe)
        meta = {
            "sources": [
                {"name": s.label, "path": s.path, **c[1].as_dict()}
                for s, c in zip(self.sources, checked, strict=True)
            ],
            "longest": int(lengths.max()),
            "tokens": int(lengths.sum()),
            "bins": len(plan),
        }
        return plan, meta

    # -- pickling: the plan is re-mapped from the cache folder, the sources pickle as paths ----
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self.cache_folder is not None:
            state["_plan"] = None
        return state

    def _bins(self) -> BinPlan:
        if self._plan is None:
            assert self.cache_folder is not None  # only dropped when it can be re-read
            try:
                self._plan = BinPlan(
                    np.load(self.cache_folder / "bin_rows.npy", mmap_mode="r"),
                    np.load(self.cache_folder / "bin_offsets.npy", mmap_mode="r"),
                )
            except (OSError, ValueError, EOFError) as err:
                raise InputError(
                    f"{self.cache_folder}: the bin plan vanished or broke since the dataset was "
                    f"built ({err}); build the dataset again"
                ) from err
        return self._plan

    # -- items ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._n_items

    def _row(self, row: int) -> dict[str, np.ndarray]:
        source = int(np.searchsorted(self._starts, row, side="right")) - 1
        local = row - int(self._starts[source])
        limit = self.sources[source].max_seq_len
        piece = self._datasets[source].data.table.slice(local, 1)
        out = {}
        for column in (*REQUIRED_COLUMNS, *self.extra_columns):
            values = pc.list_flatten(piece.column(column)).to_numpy(zero_copy_only=False)
            out[column] = values[:limit]
        return out

    def __getitem__(self, idx: int) -> dict[str, torch.Tensor]:
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
            raise TypeError(f"index must be an integer, got {type(idx).__name__}")
        if not -self._n_items <= idx < self._n_items:
            raise IndexError(f"index {idx} out of range for {self._n_items} items")
        rows = self._bins().bin(int(idx) % self._n_items)
        parts = [self._row(int(r)) for r in rows]
        return self._assemble(parts, rows)

    def _assemble(
        self, parts: list[dict[str, np.ndarray]], rows: np.ndarray
    ) -> dict[str, torch.Tensor]:
        return assemble_item(
            parts,
            self.item_length,
            packed=self.method is not None,
            columns=(*REQUIRED_COLUMNS, *self.extra_columns),
            multiple=self.ring_multiple,
            overflow=lambda used: InputError(
                f"{self._describe(int(rows[0]))}: the rows of this item hold {used} tokens, more "
                f"than the planned {self.item_length}; the data changed since the plan was "
                f"made: delete {self.cache_folder} and build the dataset again"
            ),
        )

    # -- identity and report -------------------------------------------------------------------
    @property
    def cache_key(self) -> str:
        """The plan cache's key: the folder ``<dataset_prepared_path>/<cache_key>/``."""
        return self._fingerprint

    def fingerprint(self) -> str:
        """What this dataset yields, for a resumed loader: every option, each source's row count
        and a sample of its rows' contents, and the plan's shape. Unlike the cache key (which
        also covers paths and file times, so an edited file is planned again), it leaves out
        where the rows are: a byte-identical copy on another node resumes, other rows with the
        same lengths do not."""
        if self._identity is None:
            record = {
                "version": _FINGERPRINT_VERSION,
                "sources": [
                    {
                        **{k: v for k, v in s.options().items() if k not in _WHERE_KEYS},
                        "rows": len(d),
                        "content": _row_sample_digest(d, (*REQUIRED_COLUMNS, *self.extra_columns)),
                    }
                    for s, d in zip(self.sources, self._datasets, strict=True)
                ],
                "method": self.method,
                "sequence_len": self.capacity,
                "seed": self.seed,
                "shuffle": self.shuffle,
                "vocab_size": self.vocab_size,
                "plan": {k: self._meta[k] for k in ("longest", "tokens", "bins")},
            }
            if self.ring_multiple > 1:  # (absent when 1: states saved before it still load)
                record["ring_multiple"] = self.ring_multiple
            text = json.dumps(record, sort_keys=True, default=str)
            self._identity = hashlib.sha256(text.encode()).hexdigest()[:32]
        return self._identity

    def summary(self) -> dict[str, Any]:
        tokens = int(self._meta["tokens"])
        slots = self._n_items * self.item_length
        sources = self._meta["sources"]
        return {
            "kind": "tokenized_rows",
            "sources": sources,
            "rows": int(self._starts[-1]),
            "tokens": tokens,
            "truncated_rows": sum(s["truncated_rows"] for s in sources),
            "truncated_tokens": sum(s["truncated_tokens"] for s in sources),
            "columns": [*REQUIRED_COLUMNS, *self.extra_columns],
            "sample_packing_method": self.method,
            "sample_packing_sequence_len": self.capacity,
            "items": self._n_items,
            "item_length": self.item_length,
            "fill_ratio": round(tokens / slots, 6) if slots else 0.0,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "vocab_size": self.vocab_size,
            "ring_multiple": self.ring_multiple,
            "fingerprint": self._fingerprint,
            "cache": None if self.cache_folder is None else str(self.cache_folder),
            "cache_reused": self.cache_reused,
        }
