"""Shard folders whose tokens name themselves: token = source * 10**7 + position in the source.

A window's first input token then identifies the sample (source and window), so tests can
compare sample ids across runs without trusting the loader.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

SOURCE_STRIDE = 10**7


def write_id_source(folder: Path, source: int, file_tokens: list[int]) -> Path:
    """One folder of ``.npy`` shards (uint32) holding consecutive ids of source ``source``."""
    folder.mkdir(parents=True, exist_ok=True)
    start = source * SOURCE_STRIDE
    for i, count in enumerate(file_tokens):
        np.save(folder / f"shard_{i:03d}.npy", np.arange(start, start + count, dtype=np.uint32))
        start += count
    return folder


def sample_ids(batch: dict) -> list[int]:
    return batch["input_ids"][:, 0].tolist()
