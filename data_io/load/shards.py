"""``MemoryMappedDataset``: fixed windows over a folder of flat token shards (formats.md §6).

Each shard is a 1-D token array, ``*.npy`` (dtype in the header) or raw ``*.bin`` (dtype from the
folder's metadata file, see ``shard_metadata``), documents separated by an EOS id. The dataset cuts
every shard, in sorted name order, into non-overlapping windows of ``seq_len`` tokens; a shard's
tail shorter than ``seq_len`` is dropped (``summary()`` counts it). As in KempnerForge, the caller
passes ``seq_len = context + 1`` and item ``i`` is ``input_ids = window[:-1]``,
``labels = window[1:]``, both ``context`` long.

Start-up reads only each shard's header or size, and memory is O(number of shards): a window
count per shard and their cumulative sum (``np.searchsorted`` maps an index to its shard). Shards
are memory-mapped on first use in each process; maps are never pickled, so the dataset is cheap
and safe to send to DataLoader workers.

With ``pack_sequences=True`` (needs ``eos_token_id``) a window may hold several documents: each
EOS belongs to the document it ends, so the label of an input EOS (the next document's first
token) is ``-100``, and the sample carries ``doc_ids`` (document number within the window, from
0) and optionally ``position_ids`` (restarting at 0 per document) and ``cu_seqlens`` (int32
document boundaries, 0 … context). A trailing EOS at the window's last token opens nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from data_io.errors import ConfigError, InputError
from data_io.load.layouts import IGNORE_INDEX
from data_io.load.shard_metadata import TOKEN_DTYPES, read_bin_dtype

__all__ = ["MemoryMappedDataset", "pack_window"]

_SUFFIXES = (".npy", ".bin")
# Open maps kept per process: each holds a file descriptor, and a folder may have thousands of
# shards, so the least recently used are closed beyond this many.
_MAX_OPEN_MAPS = 64


@dataclass(frozen=True)
class _Shard:
    """What start-up learns about one shard: enough to map it later without re-checking."""

    path: Path
    dtype: np.dtype
    tokens: int
    header: bool  # True for .npy (np.load reads the header), False for raw .bin


def _require_int(name: str, value: object, minimum: int, why: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum} ({why}), got {value!r}")
    return int(value)


def _list_shards(data_dir: Path, file_pattern: str) -> list[Path]:
    """The shard files of ``data_dir`` matching ``file_pattern``, sorted by name."""
    if not data_dir.is_dir():
        what = "is not a directory" if data_dir.exists() else "does not exist"
        raise InputError(f"{data_dir}: shard folder {what}; pass the folder holding the shards")
    files = sorted(p for p in data_dir.glob(file_pattern) if p.is_file())
    if not files:
        raise InputError(
            f"{data_dir}: no files match {file_pattern!r}; pass file_pattern='*.bin' for raw "
            "shards or point data_dir at the folder that holds them"
        )
    odd = [p.name for p in files if p.suffix not in _SUFFIXES]
    if odd:
        raise InputError(
            f"{data_dir}: {file_pattern!r} matches files that are not .npy or .bin shards "
            f"({', '.join(odd[:5])}); narrow file_pattern"
        )
    return files


def _inspect_npy(path: Path) -> _Shard:
    """Dtype and length of an ``.npy`` shard from its header (maps it, reads no tokens)."""
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise InputError(
            f"{path}: unreadable or truncated .npy shard ({err}); re-write the shard"
        ) from err
    if array.ndim != 1 or array.dtype.name not in TOKEN_DTYPES:
        raise InputError(
            f"{path}: a shard must be a 1-D array of token ids ({', '.join(TOKEN_DTYPES)}), "
            f"got shape {array.shape} dtype {array.dtype}; re-write it with np.save"
        )
    return _Shard(path, array.dtype, int(array.shape[0]), header=True)


def _inspect_bin(path: Path, dtype: np.dtype) -> _Shard:
    """Length of a raw ``.bin`` shard from its size and the declared dtype."""
    size = path.stat().st_size
    if size % dtype.itemsize:
        raise InputError(
            f"{path}: {size} bytes is not a whole number of {dtype.name} tokens "
            f"({dtype.itemsize} bytes each); the file is truncated or the declared dtype is wrong"
        )
    return _Shard(path, dtype, size // dtype.itemsize, header=False)


def _inspect(data_dir: Path, files: list[Path]) -> list[_Shard]:
    bin_dtype: np.dtype | None = None
    shards = []
    for path in files:
        if path.suffix == ".npy":
            shards.append(_inspect_npy(path))
            continue
        if bin_dtype is None:  # one metadata file per folder: read once
            bin_dtype, _ = read_bin_dtype(data_dir, path)
        shards.append(_inspect_bin(path, bin_dtype))
    return shards


def pack_window(
    window: np.ndarray, eos_token_id: int, *, position_ids: bool = False, cu_seqlens: bool = False
) -> dict[str, torch.Tensor]:
    """One packed sample from a window of ``context + 1`` tokens (vectorised, no per-token loop).

    Document of token ``t`` = number of EOS strictly before ``t`` (so an EOS belongs to the
    document it ends); an input whose label lies in the next document is ``IGNORE_INDEX``.
    """
    tokens = np.asarray(window, dtype=np.int64)
    is_eos = tokens == eos_token_id
    doc = np.cumsum(is_eos) - is_eos
    labels = tokens[1:].copy()
    labels[doc[:-1] != doc[1:]] = IGNORE_INDEX
    sample = {
        "input_ids": torch.from_numpy(tokens[:-1].copy()),
        "labels": torch.from_numpy(labels),
        "doc_ids": torch.from_numpy(doc[:-1].copy()),
    }
    if position_ids or cu_seqlens:
        context = tokens.shape[0] - 1
        # Input i starts a document when it is the window's first token or follows an EOS.
        starts = np.flatnonzero(np.concatenate(([True], is_eos[: context - 1])))
        if position_ids:
            index = np.arange(context, dtype=np.int64)
            start_of = np.zeros(context, dtype=np.int64)
            start_of[starts] = starts
            sample["position_ids"] = torch.from_numpy(index - np.maximum.accumulate(start_of))
        if cu_seqlens:
            bounds = np.append(starts, context).astype(np.int32)
            sample["cu_seqlens"] = torch.from_numpy(bounds)
    return sample


class MemoryMappedDataset(Dataset):
    """Map-style dataset of ``seq_len``-token windows over a folder of flat token shards."""

    def __init__(
        self,
        data_dir: str | Path,
        seq_len: int,
        file_pattern: str = "*.npy",
        pack_sequences: bool = False,
        eos_token_id: int | None = None,
        position_ids: bool = False,
        cu_seqlens: bool = False,
        vocab_size: int | None = None,
    ) -> None:
        self.seq_len = _require_int(
            "seq_len", seq_len, 2, "a window of context + 1 tokens, the +1 for the label shift"
        )
        self._check_packing(pack_sequences, eos_token_id, position_ids, cu_seqlens)
        self.data_dir = Path(data_dir)
        self.file_pattern = file_pattern
        self.pack_sequences = pack_sequences
        self.eos_token_id = None if eos_token_id is None else int(eos_token_id)
        self.position_ids = position_ids
        self.cu_seqlens = cu_seqlens
        self.vocab_size = (
            None
            if vocab_size is None
            else _require_int("vocab_size", vocab_size, 1, "every token id must be below it")
        )
        self._shards = _inspect(self.data_dir, _list_shards(self.data_dir, file_pattern))
        counts = np.array([s.tokens // self.seq_len for s in self._shards], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(counts)))  # first window of each shard
        if self._starts[-1] == 0:
            longest = max(self._shards, key=lambda s: s.tokens)
            raise ConfigError(
                f"seq_len={self.seq_len} is longer than every shard in {self.data_dir} (longest: "
                f"{longest.path.name}, {longest.tokens} tokens), so there is no window; "
                "lower seq_len or add data"
            )
        self._maps: OrderedDict[int, np.ndarray] = OrderedDict()

    @staticmethod
    def _check_packing(
        pack_sequences: bool, eos_token_id: int | None, position_ids: bool, cu_seqlens: bool
    ) -> None:
        if pack_sequences:
            _require_int("eos_token_id", eos_token_id, 0, "pack_sequences=True splits on it")
        elif position_ids or cu_seqlens:
            raise ConfigError(
                "position_ids and cu_seqlens describe packed documents; "
                "pass pack_sequences=True with eos_token_id"
            )

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getstate__(self) -> dict[str, Any]:
        # A pickled memory map is a full copy of the file: workers re-open their own maps.
        state = self.__dict__.copy()
        state["_maps"] = OrderedDict()
        return state

    def _map(self, index: int) -> np.ndarray:
        """Shard ``index`` memory-mapped in this process (opened on first use, LRU-bounded)."""
        array = self._maps.get(index)
        if array is not None:
            self._maps.move_to_end(index)
            return array
        shard = self._shards[index]
        try:
            if shard.header:
                array = np.load(shard.path, mmap_mode="r", allow_pickle=False)
            else:
                array = np.memmap(shard.path, dtype=shard.dtype, mode="r", shape=(shard.tokens,))
        except (ValueError, OSError, EOFError) as err:
            raise InputError(
                f"{shard.path}: cannot map the shard ({err}); it changed or vanished since the "
                "dataset was built; rebuild the dataset"
            ) from err
        if array.shape != (shard.tokens,) or array.dtype != shard.dtype:
            raise InputError(
                f"{shard.path}: now {array.shape} {array.dtype}, was ({shard.tokens},) "
                f"{shard.dtype} when the dataset was built; rebuild the dataset"
            )
        self._maps[index] = array
        if len(self._maps) > _MAX_OPEN_MAPS:
            self._maps.popitem(last=False)
        return array

    def window(self, idx: int) -> np.ndarray:
        """The ``seq_len`` raw tokens of item ``idx`` (int64), without the label shift."""
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)):
            raise TypeError(f"index must be an integer, got {type(idx).__name__}")
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} out of range for {n} windows of {self.data_dir}")
        idx = int(idx) % n
        shard = int(np.searchsorted(self._starts, idx, side="right")) - 1
        start = (idx - int(self._starts[shard])) * self.seq_len
        tokens = np.array(self._map(shard)[start : start + self.seq_len], dtype=np.int64)
        if self.vocab_size is not None and int(tokens.max()) >= self.vocab_size:
            # One max() per window: the check costs a pass over tokens already in cache.
            where = start + int(np.argmax(tokens >= self.vocab_size))
            raise InputError(
                f"{self._shards[shard].path}: token {where} is id {int(tokens.max())}, not below "
                f"vocab_size={self.vocab_size}; the shard was written with another tokenizer "
                "(re-prepare it) or vocab_size is wrong"
            )
        return tokens

    def __getitem__(self, idx: int) -> dict[str, torch.Tensor]:
        tokens = self.window(idx)
        if self.pack_sequences:
            assert self.eos_token_id is not None  # checked in __init__
            return pack_window(
                tokens,
                self.eos_token_id,
                position_ids=self.position_ids,
                cu_seqlens=self.cu_seqlens,
            )
        return {
            "input_ids": torch.from_numpy(tokens[:-1].copy()),
            "labels": torch.from_numpy(tokens[1:].copy()),
        }

    def fingerprint(self) -> str:
        """What this dataset yields: each shard's name, dtype and length, and the options.

        Paths and mtimes are left out on purpose: a folder copied to another node resumes.
        """
        parts = [
            self.seq_len,
            self.pack_sequences,
            self.eos_token_id,
            self.position_ids,
            self.cu_seqlens,
            [[s.path.name, s.dtype.name, s.tokens] for s in self._shards],
        ]
        return hashlib.blake2b(json.dumps(parts).encode(), digest_size=16).hexdigest()

    def summary(self) -> dict[str, Any]:
        """Shards, tokens and windows, and what the window cut drops (each shard's short tail)."""
        tokens = np.array([s.tokens for s in self._shards], dtype=np.int64)
        tails = tokens % self.seq_len
        return {
            "data_dir": str(self.data_dir),
            "seq_len": self.seq_len,
            "files": len(self._shards),
            "dtypes": sorted({s.dtype.name for s in self._shards}),
            "tokens": int(tokens.sum()),
            "windows": len(self),
            "dropped_tail_tokens": int(tails.sum()),
            "files_with_dropped_tail": int(np.count_nonzero(tails)),
            # Whole shards that are shorter than one window contribute nothing at all.
            "files_without_windows": [s.path.name for s in self._shards if s.tokens < self.seq_len],
        }
