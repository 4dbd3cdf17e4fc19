"""Synthetic tokenized corpora in the tokenizer's layout (formats.md §3), for tests, the
benchmark and ``data_io example`` — no Rust extension, no real tokenizer needed.

Rows are written back to back; token ids are pseudo-random below ``vocab_size`` (a repeated
random block, so that gigabyte corpora are cheap to generate) and streamed in chunks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DEFAULT_TOKENIZER_INFO = {
    "tokenizer_path": "trained_tokenizers/synthetic/tokenizer.json",
    "boq": 6,
    "eoq": 7,
    "eoa": 11,
    "condition_mapping": {"direct": 8, "cot": 9, "noisy": 12, "synth": 13},
}
_BLOCK = 1 << 20


@dataclass(frozen=True)
class SyntheticTask:
    """One task folder: its rows' instruction and response lengths, and its token dtype."""

    inst_len: np.ndarray
    resp_len: np.ndarray
    token_dtype: str = "<u4"


def _save(path: Path, array: np.ndarray) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with temporary.open("wb") as handle:
        np.save(handle, array)
    os.replace(temporary, path)


def write_task(folder: Path, task: SyntheticTask, *, vocab_size: int, seed: int = 0) -> None:
    """Write one task folder (tokens, the four <u8 index arrays, metadata.json)."""
    folder.mkdir(parents=True, exist_ok=True)
    inst_len = np.asarray(task.inst_len, dtype=np.uint64)
    resp_len = np.asarray(task.resp_len, dtype=np.uint64)
    row_len = inst_len + resp_len
    row_start = np.zeros(len(row_len), dtype=np.uint64)
    if len(row_len):
        row_start[1:] = np.cumsum(row_len)[:-1]
    total = int(row_len.sum())
    dtype = np.dtype(task.token_dtype)
    block = np.random.default_rng(seed).integers(0, vocab_size, _BLOCK).astype(dtype)
    tokens_path = folder / "tokens.npy"
    temporary = folder / ".tokens.npy.tmp"
    with temporary.open("wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": dtype.str, "fortran_order": False, "shape": (total,)}
        )
        written = 0
        while written < total:
            count = min(_BLOCK, total - written)
            handle.write(np.roll(block, written % 7919)[:count].tobytes())
            written += count
    os.replace(temporary, tokens_path)
    _save(folder / "inst_start.npy", row_start)
    _save(folder / "inst_len.npy", inst_len)
    _save(folder / "resp_start.npy", row_start + inst_len)
    _save(folder / "resp_len.npy", resp_len)
    (folder / "metadata.json").write_text(
        json.dumps({"source_mtime": 0, "source_size": total, "synthetic_seed": seed})
    )


def write_corpus(
    root: Path,
    tasks: Mapping[str, SyntheticTask],
    *,
    vocab_size: int = 65_536,
    tokenizer_info: Mapping[str, object] | None = None,
    seed: int = 0,
) -> Path:
    """Write ``root/tokenizer_info.json`` and one folder per task; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    info = dict(DEFAULT_TOKENIZER_INFO if tokenizer_info is None else tokenizer_info)
    info.setdefault("vocab_size", vocab_size)
    (root / "tokenizer_info.json").write_text(json.dumps(info))
    for index, (name, task) in enumerate(sorted(tasks.items())):
        write_task(root / name, task, vocab_size=vocab_size, seed=seed + index)
    return root


def random_task(
    rng: np.random.Generator,
    rows: int,
    *,
    max_inst: int = 300,
    max_resp: int = 600,
    token_dtype: str = "<u4",
) -> SyntheticTask:
    """Rows with log-uniform-ish lengths (instruction >= 2: BOQ and EOQ; response >= 1: EOA)."""
    inst = np.exp(rng.uniform(np.log(2), np.log(max_inst + 1), rows)).astype(np.uint64)
    resp = np.exp(rng.uniform(0, np.log(max_resp + 1), rows)).astype(np.uint64)
    return SyntheticTask(inst_len=inst, resp_len=np.maximum(resp, 1), token_dtype=token_dtype)
