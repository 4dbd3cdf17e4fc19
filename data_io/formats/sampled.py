"""Open and check a sampled output folder (formats.md §4) before any batch is built.

Everything the loader reads is checked here, vectorised, when the dataset is constructed, so that
a folder whose ``metadata.json`` and arrays disagree fails at start with a message naming the file
and the row, instead of crashing (or silently training on garbage) in the middle of an epoch.
Arrays are memory-mapped: nothing is read into RAM beyond what the checks touch, and no handle is
kept open (callers re-open lazily in each process).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_io.errors import InputError
from data_io.formats.provenance import TOKENIZER_INFO
from data_io.formats.task_arrays import INDEX_NAMES
from data_io.util.words import counted

__all__ = [
    "INDEX_NAMES",
    "EpochIndex",
    "FolderIdentity",
    "SampledMetadata",
    "folder_identity",
    "open_epoch",
    "open_tokens",
    "read_metadata",
]

_RESAMPLE = "re-run `data_io sample` to rebuild the folder"
# The sampler's marker block in metadata.json (data_io.sampling.output.MARKER_KEY; not imported,
# so that the loader does not pull in the sampler).
_MARKER_KEY = "data_io"
_MARKER_FIELDS = ("inputs", "config", "code")
# The content fingerprint of a folder without a marker hashes this many evenly spaced runs of
# consecutive elements per array (the first and last included). Runs, not single elements: a
# memory-mapped read costs a page fault whether it takes 8 bytes or 4 KiB.
_FINGERPRINT_RUNS = 64
_FINGERPRINT_RUN = 512


@dataclass(frozen=True)
class SampledMetadata:
    """The parts of ``metadata.json`` the loader uses (extra keys are allowed and ignored)."""

    max_seq_len: int  # the sampler's context_size: longest inst_len + resp_len of any row
    total_length: int
    vocab_size: int | None  # tokenizer_info.vocab_size, used to check token ids
    tokenizer_info: dict[str, Any]
    # Written by this project's sampler only; None in a folder from the original pipeline.
    marker: dict[str, Any] | None = None  # inputs' fingerprint, config, code version
    epochs: int | None = None
    rows_per_epoch: int | None = None
    num_tokens: int | None = None
    token_dtype: str | None = None

    @property
    def seed(self) -> int | None:
        """The sampler's seed, when the marker records it."""
        config = (self.marker or {}).get("config")
        seed = config.get("seed") if isinstance(config, dict) else None
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


@dataclass(frozen=True)
class EpochIndex:
    """One epoch's row table (four equally long int64 arrays, possibly memory-mapped)."""

    inst_start: np.ndarray
    inst_len: np.ndarray
    resp_start: np.ndarray
    resp_len: np.ndarray

    @property
    def rows(self) -> int:
        return int(self.inst_len.shape[0])


def _what_folder_instead(folder: Path) -> str:
    """What to do with a folder that has no sampled ``metadata.json``: another stage's output
    is named, with the way to go on from it."""
    if (folder / TOKENIZER_INFO).is_file():
        command = shlex.quote(f"tokenized_path={folder}")
        return (
            "this is a tokenized folder (`data_io tokenize`'s output), not a sampled one: sample "
            f"it first (`data_io sample {command}`) and load the sampled folder"
        )
    if (folder / "dataset_metadata.json").is_file():
        return (
            "this is a flat-shard folder (`data_io prepare`'s or MyPT's), not a sampled one: "
            "load its train/ or val/ shards with data_io.load.MemoryMappedDataset (with "
            "file_pattern='*.bin' for prepare's .bin shards)"
        )
    if (folder / "metadata.yaml").is_file():
        return (
            "this is a flat-shard folder (tatm's layout), not a sampled one: load it with "
            "data_io.load.MemoryMappedDataset"
        )
    return f"the folder is not a complete sampled output ({_RESAMPLE})"


def read_metadata(folder: Path) -> SampledMetadata:
    """Parse and check ``<folder>/metadata.json``."""
    path = folder / "metadata.json"
    if not folder.is_dir():
        raise InputError(f"{folder}: no such sampled folder; run `data_io sample` first")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: missing; {_what_folder_instead(folder)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc}); {_RESAMPLE}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(raw).__name__}")

    def need_int(key: str, minimum: int) -> int:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{path}: key {key!r} must be an integer, got {value!r}; {_RESAMPLE}")
        if value < minimum:
            raise InputError(f"{path}: key {key!r} must be >= {minimum}, got {value}")
        return value

    max_seq_len = need_int("max_seq_len", 2)
    total_length = need_int("total_length", 0)
    if raw.get("vocab_size", None) is not None:
        # The HRM-Text trainer asserts this is null and reads tokenizer_info.vocab_size instead.
        raise InputError(
            f"{path}: key 'vocab_size' must be null (formats.md §4), got {raw['vocab_size']!r}; "
            "the vocabulary size belongs in tokenizer_info.vocab_size"
        )
    info = raw.get("tokenizer_info")
    if not isinstance(info, dict):
        raise InputError(
            f"{path}: key 'tokenizer_info' must be an object, got {info!r}; {_RESAMPLE}"
        )
    vocab = info.get("vocab_size")
    if vocab is not None and (isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1):
        raise InputError(
            f"{path}: tokenizer_info.vocab_size must be a positive integer, got {vocab!r}"
        )
    marker = raw.get(_MARKER_KEY)
    if marker is None:
        # A folder written by the original pipeline: none of the keys below exist there.
        return SampledMetadata(max_seq_len, total_length, vocab, info)
    if not isinstance(marker, dict) or any(k not in marker for k in _MARKER_FIELDS):
        raise InputError(
            f"{path}: the sampler's {_MARKER_KEY!r} block must be an object with keys "
            f"{', '.join(_MARKER_FIELDS)}, got {marker!r}; {_RESAMPLE}"
        )
    # The sampler writes these with its marker, in the same file: a folder with the marker and
    # without them was not written by it.
    dtype = raw.get("token_dtype")
    if not isinstance(dtype, str):
        raise InputError(
            f"{path}: key 'token_dtype' must be a dtype name, got {dtype!r}; {_RESAMPLE}"
        )
    return SampledMetadata(
        max_seq_len,
        total_length,
        vocab,
        info,
        marker=marker,
        epochs=need_int("epochs", 1),
        rows_per_epoch=need_int("rows_per_epoch", 0),
        num_tokens=need_int("num_tokens", 0),
        token_dtype=dtype,
    )


def _load_1d(path: Path, what: str) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: missing {what}; {_RESAMPLE}") from None
    except (ValueError, OSError, EOFError) as exc:  # EOFError: an empty file
        raise InputError(f"{path}: not a readable .npy array ({exc}); {_RESAMPLE}") from None
    if array.ndim != 1:
        raise InputError(f"{path}: {what} must be 1-D, got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise InputError(f"{path}: {what} must hold integers, got dtype {array.dtype}")
    return array


def open_tokens(folder: Path, meta: SampledMetadata | None = None) -> np.ndarray:
    """Memory-map ``tokens.npy`` (any integer dtype; the sampler writes uint8/uint16/int32).

    With ``meta``, also check that the dtype can hold every id of the vocabulary (a pool written
    for a smaller vocabulary would have wrapped ids around) and agrees with what metadata.json
    says the sampler wrote.
    """
    path = folder / "tokens.npy"
    tokens = _load_1d(path, "token pool")
    if meta is None:
        return tokens
    if meta.vocab_size is not None and np.iinfo(tokens.dtype).max < meta.vocab_size - 1:
        raise InputError(
            f"{path}: dtype {tokens.dtype} holds ids up to {np.iinfo(tokens.dtype).max}, but "
            f"tokenizer_info.vocab_size in metadata.json is {meta.vocab_size} (largest id "
            f"{meta.vocab_size - 1}); the pool belongs to another tokenizer: {_RESAMPLE}"
        )
    if meta.token_dtype is not None and np.dtype(tokens.dtype).name != meta.token_dtype:
        raise InputError(
            f"{path}: dtype {tokens.dtype}, but metadata.json says the sampler wrote "
            f"{meta.token_dtype}; the file was replaced after sampling: {_RESAMPLE}"
        )
    if meta.num_tokens is not None and tokens.shape[0] != meta.num_tokens:
        raise InputError(
            f"{path}: {tokens.shape[0]} tokens, but metadata.json says the sampler wrote "
            f"{meta.num_tokens}; the file is truncated or was replaced: {_RESAMPLE}"
        )
    return tokens


def _sampled_epochs(folder: Path) -> list[int]:
    found = (re.fullmatch(r"epoch_(\d+)", p.name) for p in folder.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def check_epochs_present(folder: Path, meta: SampledMetadata) -> None:
    """Every epoch folder ``metadata.json`` promises is there: a loader opened for epoch 0 of a
    folder that lost ``epoch_3/`` says so now, not hours into training when it reaches it."""
    if meta.epochs is None:
        return
    lost = [k for k in range(meta.epochs) if not (folder / f"epoch_{k}").is_dir()]
    if lost:
        names = ", ".join(f"epoch_{k}" for k in lost[:8]) + (", ..." if len(lost) > 8 else "")
        raise InputError(
            f"{folder}: {names} missing, though metadata.json says epochs 0..{meta.epochs - 1} "
            f"were sampled; the folder is incomplete: {_RESAMPLE}"
        )


def open_epoch(
    folder: Path, epoch: int, n_tokens: int, meta: SampledMetadata, *, check: bool = True
) -> EpochIndex:
    """Memory-map ``epoch_<epoch>/*.npy`` and (with ``check``) verify every row against the pool."""
    edir = folder / f"epoch_{epoch}"
    if not edir.is_dir():
        have = _sampled_epochs(folder)
        listed = ", ".join(map(str, have)) if have else "none"
        if meta.epochs is not None and epoch < meta.epochs:
            # The marker promises this epoch: the folder lost it after sampling.
            raise InputError(
                f"{edir}: missing, though metadata.json says epochs 0..{meta.epochs - 1} were "
                f"sampled (present: {listed}); the folder is incomplete: {_RESAMPLE}"
            )
        raise InputError(
            f"{edir}: epoch {epoch} was not sampled (sampled epochs: {listed}); "
            f"re-run `data_io sample` with epochs={epoch + 1} or more, or ask for a sampled epoch"
        )
    arrays = {name: _load_1d(edir / f"{name}.npy", name) for name in INDEX_NAMES}
    rows = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(rows.values())) != 1:
        sizes = ", ".join(f"{k}.npy={v}" for k, v in rows.items())
        raise InputError(f"{edir}: the four index arrays disagree in length ({sizes}); {_RESAMPLE}")
    if meta.rows_per_epoch is not None and rows["inst_start"] != meta.rows_per_epoch:
        raise InputError(
            f"{edir}: {rows['inst_start']} rows in each index array, but metadata.json says "
            f"the sampler wrote {meta.rows_per_epoch} per epoch; the epoch was replaced or "
            f"truncated after sampling: {_RESAMPLE}"
        )
    index = EpochIndex(**arrays)
    if check:
        _check_rows(edir, index, n_tokens, meta.max_seq_len)
    return index


def _first_bad(edir: Path, name: str, bad: np.ndarray, message: Callable[[int], str]) -> None:
    """Raise for the first True in ``bad`` (row number = position in the epoch arrays)."""
    if bad.any():
        row = int(np.argmax(bad))
        count = int(bad.sum())
        raise InputError(
            f"{edir / (name + '.npy')} row {row}: {message(row)} ({counted(count, 'bad row')} in all); "
            f"{_RESAMPLE}"
        )


def _check_rows(edir: Path, index: EpochIndex, n_tokens: int, max_seq_len: int) -> None:
    # Work in int64 so that narrow dtypes cannot wrap around in the sums below (a uint64 value
    # beyond int64 turns negative and is reported as such).
    ist = np.asarray(index.inst_start, dtype=np.int64)
    il = np.asarray(index.inst_len, dtype=np.int64)
    rst = np.asarray(index.resp_start, dtype=np.int64)
    rl = np.asarray(index.resp_len, dtype=np.int64)
    _first_bad(
        edir,
        "inst_len",
        il < 1,
        lambda r: f"inst_len={il[r]}; a row needs at least one instruction token",
    )
    _first_bad(
        edir,
        "resp_len",
        rl < 1,
        lambda r: f"resp_len={rl[r]}; a row needs at least the end-of-answer token",
    )
    _first_bad(edir, "inst_start", ist < 0, lambda r: f"inst_start={ist[r]} is negative")
    _first_bad(edir, "resp_start", rst < 0, lambda r: f"resp_start={rst[r]} is negative")
    _first_bad(
        edir,
        "inst_start",
        ist + il > n_tokens,
        lambda r: (
            f"instruction {ist[r]}..{ist[r] + il[r]} runs past the end of tokens.npy ({n_tokens} tokens)"
        ),
    )
    _first_bad(
        edir,
        "resp_start",
        rst + rl > n_tokens,
        lambda r: (
            f"response {rst[r]}..{rst[r] + rl[r]} runs past the end of tokens.npy ({n_tokens} tokens)"
        ),
    )
    _first_bad(
        edir,
        "inst_len",
        il + rl > max_seq_len,
        lambda r: (
            f"inst_len + resp_len = {il[r] + rl[r]} exceeds max_seq_len={max_seq_len} in metadata.json"
        ),
    )


@dataclass(frozen=True)
class FolderIdentity:
    """What a sampled folder holds, as a digest: two folders with equal digests hold the same rows.

    ``kind`` is ``"marker"`` when the digest comes from the sampler's metadata marker (inputs'
    fingerprint, config with the seed, code version: the sampler is deterministic, so these
    determine the content), ``"content"`` for a folder from the original pipeline (no marker),
    where it is a sampled hash of the files themselves. The folder's path is not part of it: a
    state stays valid when the same sample is rebuilt elsewhere (another node's RAM disk).
    """

    kind: str
    digest: str
    seed: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "digest": self.digest, "seed": self.seed}


def folder_identity(folder: Path, meta: SampledMetadata) -> FolderIdentity:
    """The identity of ``folder`` (cheap: no pass over the token pool or the epoch arrays)."""
    if meta.marker is not None:
        canonical = json.dumps(meta.marker, sort_keys=True, separators=(",", ":"))
        return FolderIdentity("marker", hashlib.sha256(canonical.encode()).hexdigest(), meta.seed)
    return FolderIdentity("content", _content_digest(folder), None)


def _content_digest(folder: Path) -> str:
    """A hash over metadata.json and each array's header and a fixed sample of its elements.

    Another seed or another corpus reorders or moves rows everywhere in the epoch arrays (the
    sampler shuffles each epoch as a whole), so the evenly spaced samples differ; reading 64
    runs per file keeps this to milliseconds even for 10-million-row epochs.
    """
    digest = hashlib.sha256((folder / "metadata.json").read_bytes())
    arrays = [folder / "tokens.npy"]
    for epoch in _sampled_epochs(folder):
        arrays += [folder / f"epoch_{epoch}" / f"{name}.npy" for name in INDEX_NAMES]
    for path in arrays:
        digest.update(b"\0" + path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(_array_sample(path))
    return digest.hexdigest()


def _array_sample(path: Path) -> bytes:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError):
        # Unreadable here; the checks name it if the loader ever needs this file.
        return b"unreadable"
    flat = array.reshape(-1)
    n = flat.shape[0]
    header = f"{array.dtype.str}{array.shape}".encode()
    if n <= _FINGERPRINT_RUNS * _FINGERPRINT_RUN:
        return header + np.ascontiguousarray(flat).tobytes()
    starts = np.linspace(0, n - _FINGERPRINT_RUN, _FINGERPRINT_RUNS).astype(np.int64)
    runs = (np.ascontiguousarray(flat[s : s + _FINGERPRINT_RUN]).tobytes() for s in starts)
    return header + b"".join(runs)
