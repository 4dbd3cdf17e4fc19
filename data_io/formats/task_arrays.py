"""The tokenizer's per-task arrays (formats.md §3): their names, token dtypes, and the header of
``tokens.npy`` read without its data. Ground shared by the stages that read a tokenized folder
(sampling, provenance checks, inspect); it imports no stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_io.errors import InputError

__all__ = ["INDEX_NAMES", "TASK_FILES", "TOKEN_DTYPES", "TokenFile", "read_token_header"]

INDEX_NAMES = ("inst_start", "inst_len", "resp_start", "resp_len")
TASK_FILES = ("tokens.npy", *(f"{name}.npy" for name in INDEX_NAMES))
# Token dtypes the tokenizer writes: <u4 by default, <u2 (or u1) with --token-dtype auto.
TOKEN_DTYPES = (np.dtype("<u4"), np.dtype("<u2"), np.dtype("u1"))


@dataclass(frozen=True)
class TokenFile:
    """Where a task's ``tokens.npy`` keeps its data, read from the header only."""

    path: Path
    dtype: np.dtype
    length: int
    data_offset: int


def read_token_header(path: Path, task: str) -> TokenFile:
    """Dtype, length and data offset of a 1-D ``tokens.npy`` without reading its data."""
    try:
        with path.open("rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(handle)
            else:
                raise InputError(
                    f"task {task}: {path} uses .npy version {version}; expected 1.0/2.0"
                )
            data_offset = handle.tell()
    except FileNotFoundError:
        raise InputError(f"task {task}: {path} is missing") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"task {task}: {path} is not a valid .npy file: {exc}") from exc
    if len(shape) != 1 or fortran:
        raise InputError(f"task {task}: {path} must be a 1-D array, got shape {shape}")
    if dtype not in TOKEN_DTYPES:
        raise InputError(
            f"task {task}: {path} has dtype {dtype.str}; token ids must be <u4, <u2 or u1"
        )
    expected_size = data_offset + shape[0] * dtype.itemsize
    actual_size = path.stat().st_size
    if actual_size < expected_size:
        raise InputError(
            f"task {task}: {path} is truncated ({actual_size} bytes, header promises "
            f"{expected_size})"
        )
    return TokenFile(path=path, dtype=dtype, length=int(shape[0]), data_offset=data_offset)
