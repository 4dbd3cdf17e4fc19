"""``MemoryMappedDataset``: fixed windows over a folder of flat token shards (formats.md §6).

Each shard is a 1-D token array, ``*.npy`` (dtype in the header) or raw ``*.bin`` (dtype from the
folder's metadata file, see ``shard_metadata``), documents separated by an EOS id. The dataset cuts
every shard, in sorted name order, into non-overlapping windows of ``seq_len`` tokens; a shard's
tail shorter than ``seq_len`` is dropped (``summary()`` counts it). A ``.bin`` shard's dtype may
also be given (``dtype=``, the config's ``data.dtype``) when the metadata does not declare it,
and must agree with the metadata when both do. As in KempnerForge, the caller
passes ``seq_len = context + 1`` and item ``i`` is ``input_ids = window[:-1]``,
``labels = window[1:]``, both ``context`` long.

Start-up reads only each shard's header or size, and memory is O(number of shards): a window
count per shard and their cumulative sum (``np.searchsorted`` maps an index to its shard). A
window is one positioned read (``os.preadv``) from a shard opened on first use in each process
(at most 256 kept open); file descriptors are never pickled, so the dataset is cheap and safe to
send to DataLoader workers. Reads rather than memory maps: with thousands of shards read at
random, re-mapping a shard costs a hundred times more than re-opening it.

With ``pack_sequences=True`` (needs ``eos_token_id``) a window may hold several documents: each
EOS belongs to the document it ends, so the label of an input EOS (the next document's first
token) is ``-100``, and the sample carries ``doc_ids`` (document number within the window, from
0) and optionally ``position_ids`` (restarting at 0 per document) and ``cu_seqlens`` (int32
document boundaries, 0 … context). A trailing EOS at the window's last token opens nothing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from data_io.errors import ConfigError, InputError
from data_io.formats.shards import (
    TOKEN_DTYPES,
    Declarations,
    Declared,
    declared_dtype,
    read_bin_dtype,
    read_declarations,
)
from data_io.formats.task_arrays import INDEX_NAMES
from data_io.load.dataloader.collate import new_batch_tensor, pack_rows
from data_io.load.dataset_state import MapDatasetState

__all__ = ["MemoryMappedDataset", "honour_declared", "pack_window"]

_SUFFIXES = (".npy", ".bin")
# Open shards kept per process: each holds a file descriptor, and a folder may have thousands
# of shards, so the least recently used are closed beyond this many. A window is read with one
# positioned read (os.preadv), so reopening a shard costs one open(), not a new memory map.
_MAX_OPEN_FILES = 256
# The content digest reads this many evenly spaced runs of this many tokens per shard.
_CONTENT_RUNS = 4
_CONTENT_RUN = 256


@dataclass(frozen=True)
class _Shard:
    """What start-up learns about one shard: enough to map it later without re-checking."""

    path: Path
    dtype: np.dtype
    tokens: int
    offset: int  # bytes before the first token: the .npy header, 0 for raw .bin

    @property
    def size(self) -> int:
        return self.offset + self.tokens * self.dtype.itemsize


def _require_int(name: str, value: object, minimum: int, why: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum} ({why}), got {value!r}")
    return int(value)


def honour_declared(name: str, given: int | None, declared: Declared | None) -> int | None:
    """``given`` when it agrees with what the producer declared, the declared value when nothing
    is given. An EOS id must be the declared one (the shards end documents with it); a
    vocabulary may be larger than the declared one (models pad it), never smaller."""
    if declared is None:
        return given
    if given is None:
        return declared.value
    vocab = name.endswith("vocab_size")
    agrees = given >= declared.value if vocab else given == declared.value
    if isinstance(given, bool) or not isinstance(given, (int, np.integer)) or agrees:
        return given  # a non-integer is named by the caller's own check
    rule = "at least" if vocab else "the same as"
    raise ConfigError(
        f"{name}={given} contradicts the shards' metadata: {declared.where()}; {name} must be "
        f"{rule} the value the shards were written with: leave {name} unset to use "
        f"{declared.value}, or point at the shards written with your tokenizer"
    )


def _where_shards_are(
    data_dir: Path, file_pattern: str, key: str = "file_pattern", path_key: str = "data_dir"
) -> str:
    """What to pass instead, from what ``data_dir`` holds: shards that the pattern with the
    other suffix matches, or the split folders of a prepare output (``train/``, ``val/``).
    ``key``/``path_key``: the pattern's and the folder's names where they were set
    (``eval.file_pattern``, ``data.datasets[1].path`` in a job config)."""
    for suffix, other in ((".npy", ".bin"), (".bin", ".npy")):
        if file_pattern.endswith(suffix):
            swapped = file_pattern[: -len(suffix)] + other
            if next(data_dir.glob(swapped), None) is not None:
                return f"it holds {other} shards: pass {key}={swapped!r}"
    splits = [name for name in ("train", "val") if (data_dir / name).is_dir()]
    if splits:
        where = " or ".join(str(data_dir / name) for name in splits)
        return (
            f"the shards are in its split folders: pass {path_key}={where} (with "
            f"{key}='*.bin' for prepare's .bin shards)"
        )
    if next(data_dir.iterdir(), None) is None:
        return f"the folder is empty; point {path_key} at the folder that holds the shards"
    return f"pass {key}='*.bin' for raw shards or point {path_key} at the folder that holds them"


# MyPT's guide adds data by moving a second run's shards in: their names repeat the first
# run's (shard_00000.bin, ...), so the move replaces shards, and the metadata no longer fits.
_ADDING_DATA = (
    "To add data to a prepared folder, run prepare again with the same output folder (data_io "
    "prepare NEW_FILES -o FOLDER, or prepare_dataset.py --out_dir FOLDER): it appends new shards "
    "and updates the metadata"
)


def _check_listed(data_dir: Path, shards: list[_Shard], declared: Declarations) -> None:
    """The shards found against the list ``data_io prepare`` wrote beside them, when there is
    one: a file it does not list (a stray copy, another run's shard) would be read as data, a
    listed one missing or of another length silently drops tokens. A listed shard that the
    caller's pattern leaves out, but which is there, is the caller's choice."""
    listed, by = declared.shard_tokens, declared.listed_by
    if not listed:
        return
    fix = "restore the folder as prepare wrote it, or prepare it again into a new folder"
    for shard in shards:
        recorded = listed.get(shard.path.name)
        if recorded is None:
            raise InputError(
                f"{shard.path}: a file {by} does not list (prepare did not write it, and it "
                f"would be read as data); move it out of the shard folder. {_ADDING_DATA}"
            )
        if shard.tokens != recorded:
            raise InputError(
                f"{shard.path}: {shard.tokens} tokens, {by} records {recorded}; the shard was "
                f"cut short or replaced (another run's shard of the same name moved over it?): "
                f"{fix}. {_ADDING_DATA}"
            )
    missing = [name for name in listed if not (data_dir / name).exists()]
    if missing:
        raise InputError(
            f"{data_dir / missing[0]}: missing ({len(missing)} of the {len(listed)} shards {by} "
            f"lists are); {fix}"
        )


def _check_eos_fits(eos: int, shards: list[_Shard], declared: Declarations) -> None:
    """Packing splits documents at the EOS id: one the shards' dtype cannot hold would never
    be found, and every window would be packed as one document."""
    for shard in shards:
        largest = np.iinfo(shard.dtype).max
        if eos > largest:
            if declared.eos_id is not None:
                source, fix = f" ({declared.eos_id.where()})", "fix the metadata file"
            else:
                source, fix = "", "pass the EOS id of the tokenizer the shards were written with"
            raise InputError(
                f"eos_token_id={eos}{source} cannot occur in {shard.path}, whose {shard.dtype.name} "
                f"ids go up to {largest}: packing would find no document boundary; {fix}"
            )


def _another_stage(
    data_dir: Path, file_pattern: str, files: list[Path], key: str = "file_pattern"
) -> str | None:
    """What a folder of another stage is, and how to load it, where ``files`` (what the pattern
    matched) would be read as something they are not: a task's or an epoch's row tables
    (formats.md §3, §4: row offsets, not tokens), a sampled folder matched by a wildcard, or a
    tokenized folder where nothing matched. A task's or the pool's ``tokens.npy`` is a flat
    stream of rows, each ending with its ``eoa`` token, and is read where the pattern names it
    (``tokens.npy`` in a task, ``*/tokens.npy`` at a tokenized folder: ``data_io example`` mixes
    tasks so). ``key``: the pattern's config key, for the message."""
    tables = {f"{name}.npy" for name in INDEX_NAMES}
    # In the folder itself, or in its subfolders (`*/*.npy` at a tokenized folder).
    holders = {f.parent for f in files if f.name in tables}
    if any(all((folder / t).is_file() for t in tables) for folder in holders):
        return (
            "a tokenized task or a sampled epoch (inst_start.npy, inst_len.npy, resp_start.npy, "
            "resp_len.npy hold row offsets, not tokens), not flat token shards: load a sampled "
            "folder with data_io.load.SampledDataset (docs/stages/load.md), or pass "
            f"{key}='tokens.npy' to read a task's tokens as one flat stream"
        )
    if (data_dir / "tokenizer_info.json").is_file() and not files:
        return (
            "a tokenized folder (`data_io tokenize`'s output), not flat token shards: sample it "
            "(`data_io sample`) and load the sampled folder with data_io.load.SampledDataset, "
            f"or pass {key}='*/tokens.npy' to read its tasks' tokens as flat streams"
        )
    sampled = (data_dir / "metadata.json").is_file() and (data_dir / "tokens.npy").is_file()
    wildcard = any(c in file_pattern for c in "*?[")
    if sampled and any(data_dir.glob("epoch_*")) and wildcard:
        return (
            "a sampled folder (`data_io sample`'s output), not flat token shards: load it with "
            "data_io.load.SampledDataset (docs/stages/load.md), or pass "
            f"{key}='tokens.npy' to read its token pool as one flat stream"
        )
    return None


def _list_shards(
    data_dir: Path, file_pattern: str, key: str = "file_pattern", path_key: str = "data_dir"
) -> list[Path]:
    """The shard files of ``data_dir`` matching ``file_pattern``, sorted by name. ``key`` and
    ``path_key``: the names the pattern and the folder were given by (config keys), for
    messages."""
    if not data_dir.is_dir():
        what = "is not a directory (a file)" if data_dir.exists() else "does not exist"
        raise InputError(
            f"{data_dir}: shard folder {what}, given as {path_key}; point {path_key} at the "
            "folder holding the shards"
        )
    # Sorted by path text (Path comparisons cost more than the rest of opening 10,000 shards);
    # a folder matching the pattern is caught when it is opened as a shard.
    files = sorted(data_dir.glob(file_pattern), key=str)
    other = _another_stage(data_dir, file_pattern, files, key)
    if other is not None:
        raise InputError(f"{data_dir}: {other}")
    if not files:
        raise InputError(
            f"{data_dir}: no files match {file_pattern!r}; "
            f"{_where_shards_are(data_dir, file_pattern, key, path_key)}"
        )
    odd = [p.name for p in files if p.suffix not in _SUFFIXES]
    if odd:
        raise InputError(
            f"{data_dir}: {file_pattern!r} matches files that are not .npy or .bin shards "
            f"({', '.join(odd[:5])}); narrow {key}"
        )
    return files


# What np.save writes for a 1-D C-order array; anything else goes to numpy's own parser.
_NPY_1D_HEADER = re.compile(
    r"\{'descr': '([<>|=]?[a-z]\d+)', 'fortran_order': False, 'shape': \((\d+),\), \} *\n"
)


def _read_npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype, int, int]:
    """Shape, dtype, data offset and file size of an ``.npy`` shard, reading only its header.

    Opening thousands of shards must be cheap: one small read each, and np.save's usual header
    is matched directly (numpy's general parser compiles a Python literal per file, the largest
    part of opening a 1T-token folder of 10,000 shards).
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):  # (3, 0), rare: let np.load parse it
            array = np.load(path, mmap_mode="r", allow_pickle=False)
            return array.shape, array.dtype, int(array.offset), size
        length_bytes = f.read(2 if version == (1, 0) else 4)
        length = int.from_bytes(length_bytes, "little")
        header = f.read(length)
        match = _NPY_1D_HEADER.fullmatch(header.decode("latin1"))
        if match is not None and len(header) == length:
            return (int(match[2]),), np.dtype(match[1]), f.tell(), size
        f.seek(0)
        np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        return shape, dtype, f.tell(), size


def _inspect_npy(path: Path) -> _Shard:
    """Dtype and length of an ``.npy`` shard from its header, checked against the file size."""
    try:
        shape, dtype, offset, size = _read_npy_header(path)
    # numpy parses the header as a Python literal: a damaged one raises SyntaxError or
    # tokenize.TokenError as readily as ValueError (found by fuzz/python: npy_shard).
    except (ValueError, OSError, EOFError, SyntaxError, TokenError, TypeError) as err:
        raise InputError(
            f"{path}: unreadable or truncated .npy shard ({err}); re-write the shard"
        ) from err
    if len(shape) != 1 or dtype.name not in TOKEN_DTYPES:
        raise InputError(
            f"{path}: a shard must be a 1-D array of token ids ({', '.join(TOKEN_DTYPES)}), "
            f"got shape {shape} dtype {dtype}; re-write it with np.save"
        )
    shard = _Shard(path, dtype, int(shape[0]), offset)
    if size != shard.size:
        raise InputError(
            f"{path}: unreadable or truncated .npy shard (the header announces {shard.tokens} "
            f"{dtype.name} tokens, {shard.size} bytes in all, the file has {size}); re-write "
            "the shard"
        )
    return shard


def _inspect_bin(path: Path, dtype: np.dtype) -> _Shard:
    """Length of a raw ``.bin`` shard from its size and the declared dtype."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise InputError(
            f"{path}: matches the shard pattern but is not a file; narrow file_pattern"
        )
    size = info.st_size
    if size % dtype.itemsize:
        raise InputError(
            f"{path}: {size} bytes is not a whole number of {dtype.name} tokens "
            f"({dtype.itemsize} bytes each); the file is truncated or the declared dtype is wrong"
        )
    return _Shard(path, dtype, size // dtype.itemsize, 0)


def _inspect(
    data_dir: Path, files: list[Path], dtype: str | None = None, dtype_key: str = "dtype"
) -> list[_Shard]:
    bin_dtype: np.dtype | None = None
    shards = []
    npy_declared = None  # (dtype, file) the metadata declares, read at the first .npy shard
    for path in files:
        if path.suffix == ".npy":
            shard = _inspect_npy(path)
            if npy_declared is None:
                npy_declared = declared_dtype(data_dir) or ()
            if npy_declared and shard.dtype.name != npy_declared[0].name:
                raise InputError(
                    f"{path}: its header says {shard.dtype.name}, and {npy_declared[1]} declares "
                    f"dtype {npy_declared[0].name}; one of them was replaced: fix the metadata "
                    "file or write the shard again"
                )
            shards.append(shard)
            continue
        if bin_dtype is None:  # one metadata file per folder: read once
            bin_dtype, _ = read_bin_dtype(data_dir, path, dtype, dtype_key)
        shards.append(_inspect_bin(path, bin_dtype))
    return shards


def pack_window(
    window: np.ndarray, eos_token_id: int, *, position_ids: bool = False, cu_seqlens: bool = False
) -> dict[str, torch.Tensor]:
    """One packed sample from a window of ``context + 1`` tokens (``batching.pack_rows`` on a
    single row): an EOS belongs to the document it ends, so the label after it is -100."""
    tokens = np.asarray(window, dtype=np.int64)
    inputs = torch.from_numpy(tokens[None, :-1].copy())
    labels = torch.from_numpy(tokens[None, 1:].copy())
    packed = pack_rows(
        inputs, labels, eos_token_id, position_ids=position_ids, cu_seqlens=cu_seqlens
    )
    return {k: v if k == "cu_seqlens" else v[0] for k, v in packed.items()}


class MemoryMappedDataset(MapDatasetState, Dataset):
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
        declared: Declarations | None = None,
        dtype: str | None = None,
        dtype_key: str = "dtype",
        pattern_key: str = "file_pattern",
        path_key: str = "data_dir",
    ) -> None:
        self.seq_len = _require_int(
            "seq_len", seq_len, 2, "a window of context + 1 tokens, the +1 for the label shift"
        )
        self.data_dir = Path(data_dir).expanduser()
        # What the shards' producer declared wins over nothing and must agree with the caller.
        # ``declared``: the folder's declarations when the caller has read them already.
        if declared is None:
            dir_exists = self.data_dir.is_dir()
            declared = read_declarations(self.data_dir) if dir_exists else Declarations()
        self.declared: Declarations = declared
        declared_eos = honour_declared("eos_token_id", eos_token_id, self.declared.eos_id)
        # The EOS matters only to packing: unpacked windows keep what the caller passed.
        eos_token_id = declared_eos if pack_sequences else eos_token_id
        vocab_size = honour_declared("vocab_size", vocab_size, self.declared.vocab_size)
        self._check_packing(pack_sequences, eos_token_id, position_ids, cu_seqlens)
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
        # ``dtype``: raw .bin shards' dtype when the metadata does not declare it (named in
        # errors as ``dtype_key``, the config key it came from; ``file_pattern`` likewise).
        shards = _list_shards(self.data_dir, file_pattern, pattern_key, path_key)
        self._shards = _inspect(self.data_dir, shards, dtype, dtype_key)
        _check_listed(self.data_dir, self._shards, self.declared)
        if self.pack_sequences and self.eos_token_id is not None:
            _check_eos_fits(self.eos_token_id, self._shards, self.declared)
        counts = np.array([s.tokens // self.seq_len for s in self._shards], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(counts)))  # first window of each shard
        if self._starts[-1] == 0:
            longest = max(self._shards, key=lambda s: s.tokens)
            raise ConfigError(
                f"seq_len={self.seq_len} is longer than every shard in {self.data_dir} (longest: "
                f"{longest.path.name}, {longest.tokens} tokens), so there is no window; "
                "lower seq_len or add data"
            )
        self._files: OrderedDict[int, int] = OrderedDict()

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
        # File descriptors are this process's: workers open their own.
        state = self.__dict__.copy()
        state["_files"] = OrderedDict()
        return state

    def __del__(self, _close: Callable[[int], None] = os.close) -> None:
        # os.close is bound here and nothing else is looked up (no contextlib): at interpreter
        # exit the module's globals may already be None while datasets are still collected.
        for fd in getattr(self, "_files", {}).values():
            try:  # noqa: SIM105  contextlib may already be gone at exit (see above)
                _close(fd)
            except OSError:
                pass

    def _open(self, index: int) -> int:
        """A file descriptor of shard ``index`` (opened on first use, LRU-bounded)."""
        fd = self._files.get(index)
        if fd is not None:
            self._files.move_to_end(index)
            return fd
        shard = self._shards[index]
        try:
            fd = os.open(shard.path, os.O_RDONLY)
        except OSError as err:
            raise InputError(
                f"{shard.path}: cannot open the shard ({err.strerror}); it changed or vanished "
                "since the dataset was built; rebuild the dataset"
            ) from err
        size = os.fstat(fd).st_size
        if size != shard.size:
            os.close(fd)
            now = (size - shard.offset) // shard.dtype.itemsize
            raise InputError(
                f"{shard.path}: now ({now},) {shard.dtype.name}, was ({shard.tokens},) "
                f"{shard.dtype.name} when the dataset was built; rebuild the dataset"
            )
        self._files[index] = fd
        if len(self._files) > _MAX_OPEN_FILES:
            os.close(self._files.popitem(last=False)[1])
        return fd

    def _read(self, index: int, start: int, count: int) -> np.ndarray:
        """Tokens ``start .. start + count - 1`` of shard ``index``, in the shard's dtype."""
        shard = self._shards[index]
        buffer = np.empty(count, dtype=shard.dtype)
        at = shard.offset + start * shard.dtype.itemsize
        if os.preadv(self._open(index), [buffer], at) != buffer.nbytes:
            raise InputError(
                f"{shard.path}: short read at byte {at}; the shard changed since the dataset "
                "was built; rebuild the dataset"
            )
        return buffer

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
        tokens = self._read(shard, start, self.seq_len)
        self._check_vocab(shard, start, tokens)
        return tokens.astype(np.int64)

    def _check_vocab(self, shard: int, start: int, tokens: np.ndarray) -> None:
        # Signed shards can hold negative ids, which no embedding takes: always refused.
        signed = tokens.dtype.kind == "i"
        if signed and int(tokens.min()) < 0:
            bad = np.flatnonzero(tokens < 0)[0]
            raise InputError(
                f"{self._shards[shard].path}: token {start + int(bad)} is id {int(tokens[bad])}; "
                "token ids are never negative: the shard is damaged or not a token shard"
            )
        # One max() per window: a pass over tokens that are in cache anyway.
        if self.vocab_size is None or int(tokens.max()) < self.vocab_size:
            return
        bad = np.flatnonzero(tokens >= self.vocab_size)[0]
        raise InputError(
            f"{self._shards[shard].path}: token {start + int(bad)} is id {int(tokens[bad])}, not "
            f"below vocab_size={self.vocab_size}; the shard was written with another tokenizer "
            "(re-prepare it) or vocab_size is wrong"
        )

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, torch.Tensor]:
        """The items ``indices``, already collated: each window is read straight into the
        batch's rows and the whole batch is packed at once (see ``batching``)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            raise ValueError("get_batch needs at least one index")
        shape = (idx.shape[0], self.seq_len - 1)
        inputs, labels = new_batch_tensor(shape), new_batch_tensor(shape)
        self.read_rows(idx, inputs.numpy(), labels.numpy(), np.arange(idx.shape[0]))
        return self.finish_batch(inputs, labels)

    def read_rows(
        self, indices: np.ndarray, inputs: np.ndarray, labels: np.ndarray, rows: np.ndarray
    ) -> None:
        """Write window ``indices[k]`` into row ``rows[k]`` of ``inputs`` and ``labels``."""
        n = len(self)
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise IndexError(f"indices out of range for {n} windows of {self.data_dir}")
        shard_of = np.searchsorted(self._starts, indices, side="right") - 1
        offsets = (indices - self._starts[shard_of]) * self.seq_len
        for row, shard, start in zip(
            rows.tolist(), shard_of.tolist(), offsets.tolist(), strict=True
        ):
            tokens = self._read(shard, start, self.seq_len)
            self._check_vocab(shard, start, tokens)
            inputs[row] = tokens[:-1]
            labels[row] = tokens[1:]

    def batch_options(self) -> tuple[Any, ...]:
        """What ``finish_batch`` depends on: datasets that agree can share one batch."""
        return (
            self.seq_len,
            self.pack_sequences,
            self.eos_token_id,
            self.position_ids,
            self.cu_seqlens,
        )

    def finish_batch(self, inputs: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The batch of rows read by ``read_rows``: as they are, or packed."""
        if not self.pack_sequences:
            return {"input_ids": inputs, "labels": labels}
        assert self.eos_token_id is not None  # checked in __init__
        return pack_rows(
            inputs,
            labels,
            self.eos_token_id,
            position_ids=self.position_ids,
            cu_seqlens=self.cu_seqlens,
        )

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
        # Two views of one fresh array: the batch's stack copies them once.
        window = torch.from_numpy(tokens)
        return {"input_ids": window[:-1], "labels": window[1:]}

    def fingerprint(self) -> str:
        """What this dataset yields: each shard's name, dtype, length and content, and the
        options. The content is the sha256 the producer recorded (``data_io prepare``) and a
        sample of the tokens themselves (``content_digest``), so a folder whose shards have the
        same names and lengths but other tokens does not pass for this one. Paths and mtimes
        are left out on purpose: a byte-identical copy on another node resumes.
        """
        parts = [
            self.seq_len,
            self.pack_sequences,
            self.eos_token_id,
            self.position_ids,
            self.cu_seqlens,
            [[s.path.name, s.dtype.name, s.tokens] for s in self._shards],
            self.content_digest,
        ]
        return hashlib.blake2b(json.dumps(parts).encode(), digest_size=16).hexdigest()

    @functools.cached_property
    def content_digest(self) -> str:
        """A digest of what the shards hold: each shard's recorded sha256 when its producer
        declared one, and always evenly spaced runs of its tokens (the first and last included):
        a few small reads per shard, so this costs milliseconds even for thousands of shards.
        It tells other data from this data; a byte flipped in place between two runs of a
        shard whose recorded hash was not updated is damage, which the runs may not see."""
        digest = hashlib.blake2b(digest_size=16)
        for index, shard in enumerate(self._shards):
            digest.update(shard.path.name.encode() + b"\0")
            digest.update(self.declared.sha256.get(shard.path.name, "-").encode())
            run = min(_CONTENT_RUN, shard.tokens)
            starts = np.linspace(0, shard.tokens - run, _CONTENT_RUNS).astype(np.int64)
            for start in sorted(set(starts.tolist())):
                digest.update(self._read(index, start, run).tobytes())
        return digest.hexdigest()

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
            "content": self.content_digest,
            "files_with_dropped_tail": int(np.count_nonzero(tails)),
            # Whole shards that are shorter than one window contribute nothing at all.
            "files_without_windows": [s.path.name for s in self._shards if s.tokens < self.seq_len],
        }
