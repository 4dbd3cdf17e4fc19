"""The token pool: every task's ``tokens.npy`` copied back to back into ``<out>/tokens.npy``.

The original wrote the pool through 32 threads into a memory map (8.3 GB peak RSS for a 7 GB
pool: every touched page counts). Here the Rust core (``rust/sampling/pool.rs``) streams it
with large positional reads and writes through buffers that fit a core's L2 cache, converting
the dtype (with a range check) in between. ``readers=0``: the calling thread does it all (the
least CPU); ``readers>0``: reader threads feed a calling thread that only writes (the kernel
serialises writes into one file, and on a RAM disk they are the costly part). Peak memory is
a few MiB, whatever the corpus size.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_io import _core
from data_io.errors import InputError, OutputError
from data_io.sampling.tasks import TokenFile

POOL_DTYPES = (np.dtype("u1"), np.dtype("<u2"), np.dtype("<i4"))


def pool_dtype(
    vocab_size: int | None, source_dtypes: Sequence[np.dtype], *, compat: str = "none"
) -> np.dtype:
    """The smallest of uint8/uint16/int32 that holds every token id.

    With a vocabulary size the largest id is ``vocab_size - 1`` (so 65,536 fits uint16; the
    original compared ``vocab_size <= 65535`` and wasted int32 there). Without one, the
    sources' own dtypes bound the ids; ``<u4`` sources then need int32 (checked while copying).
    ``compat="original"``: the original's rule instead (:func:`original_pool_dtype`).
    """
    if compat == "original":
        return original_pool_dtype(vocab_size)
    if vocab_size is not None:
        largest = vocab_size - 1
    elif source_dtypes:
        largest = max(int(np.iinfo(dtype).max) for dtype in source_dtypes)
    else:
        largest = 0
    for dtype in POOL_DTYPES:
        if largest <= np.iinfo(dtype).max:
            return dtype
    if vocab_size is None:
        return np.dtype("<i4")
    raise InputError(f"vocab_size {vocab_size} does not fit the int32 token pool")


def original_pool_dtype(vocab_size: int | None) -> np.dtype:
    """The original sampler's pool dtype (formats.md §4): it compares the vocabulary size,
    not the largest id, with each type's maximum: uint8 up to 255, uint16 up to 65,535, int32
    above that and when ``tokenizer_info.json`` has no ``vocab_size``. So a vocabulary of
    exactly 256 or 65,536 tokens gets the wider type. Ids the dtype cannot hold are still
    refused by the copy (the original wrapped them around silently)."""
    if vocab_size is None or vocab_size > np.iinfo(np.uint16).max:
        return np.dtype("<i4")
    return np.dtype("u1") if vocab_size <= np.iinfo(np.uint8).max else np.dtype("<u2")


def id_limit(dtype: np.dtype, vocab_size: int | None) -> int:
    """The largest id the pool accepts: the dtype's maximum, or ``vocab_size - 1`` if lower."""
    largest = int(np.iinfo(dtype).max)
    return largest if vocab_size is None else min(largest, vocab_size - 1)


def check_token_ids(
    jobs: Sequence[CopyJob], dtype: np.dtype, vocab_size: int | None, *, chunk: int = 1 << 24
) -> None:
    """The copy's range check alone, read-only: for a run that must delete the previous
    output before it can copy (the copy itself checks as it goes, at no extra cost)."""
    limit = id_limit(dtype, vocab_size)
    for job in jobs:
        source = job.source
        if source.length == 0 or int(np.iinfo(source.dtype).max) <= limit:
            continue
        data = np.memmap(
            source.path, dtype=source.dtype, mode="r", offset=source.data_offset,
            shape=(source.length,),
        )  # fmt: skip
        for start in range(0, source.length, chunk):
            piece = data[start : start + chunk]
            if int(piece.max()) > limit:
                at = int(np.argmax(piece > limit))
                raise InputError(
                    f"{source.path}: task {job.task}: token {start + at} is "
                    f"{int(piece[at])}, {_why_out_of_range(dtype, vocab_size)}"
                )


def _why_out_of_range(dtype: np.dtype, vocab_size: int | None) -> str:
    # The same words as the Rust copy's error (rust/sampling/pool.rs); the caller adds how
    # to repair the task (it knows the tokenize command).
    if vocab_size is not None and vocab_size - 1 < int(np.iinfo(dtype).max):
        return (
            f"not below vocab_size {vocab_size} of tokenizer_info.json: either this task's "
            f"tokens.npy is damaged or the task was tokenized with another tokenizer than the "
            f"one tokenizer_info.json names"
        )
    return (
        f"above the {dtype.name} pool's maximum {int(np.iinfo(dtype).max)} (vocab_size in "
        f"tokenizer_info.json is too small for this data)"
    )


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """The .npy header of a 1-D array (version 1.0, padded to 64 bytes like numpy's)."""

    buffer = io.BytesIO()
    header = {"descr": dtype.str, "fortran_order": False, "shape": (length,)}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue()


@dataclass(frozen=True)
class CopyJob:
    """Copy all of ``source`` into the pool from element ``pool_offset`` on."""

    task: str
    source: TokenFile
    pool_offset: int


def copy_tokens(
    path: Path,
    header_len: int,
    dtype: np.dtype,
    jobs: Sequence[CopyJob],
    *,
    readers: int,
    progress: Callable[[int], object],
    cancelled: threading.Event,
    vocab_size: int | None = None,
) -> None:
    """Copy every job into the pool file (which has its header and final size already).
    Token ids that do not fit ``dtype``, or are not below ``vocab_size`` (when given), are
    refused (``InputError`` naming task, file and token position), never wrapped."""

    def report(count: int) -> bool:
        progress(count)
        return not cancelled.is_set()  # False stops the copy

    sources = [
        (job.task, str(job.source.path), job.source.dtype.str, job.source.data_offset,
         job.source.length, job.pool_offset)
        for job in jobs
        if job.source.length
    ]  # fmt: skip
    _core.copy_token_pool(
        str(path), header_len, dtype.str, sources, readers=readers, progress=report,
        vocab_size=vocab_size,
    )  # fmt: skip


def write_pool(
    path: Path,
    jobs: Sequence[CopyJob],
    total_tokens: int,
    dtype: np.dtype,
    *,
    readers: int = 0,
    progress: Callable[[int], object] = lambda _count: None,
    cancelled: threading.Event | None = None,
    vocab_size: int | None = None,
) -> None:
    """Write the whole pool to ``path`` (a staging name; the caller publishes it); ids must
    be below ``vocab_size`` when it is given."""
    header = npy_header(dtype, total_tokens)
    try:
        with path.open("wb") as handle:
            handle.write(header)
            # The final size up front (sparse: no space is taken until written).
            handle.truncate(len(header) + total_tokens * dtype.itemsize)
    except OSError as exc:
        raise OutputError(f"cannot create the token pool {path}: {exc}") from exc
    copy_tokens(
        path, len(header), dtype, jobs, readers=readers, progress=progress,
        cancelled=cancelled or threading.Event(), vocab_size=vocab_size,
    )  # fmt: skip
