"""The train/val split: by document, from the document's content hash and the seed.

A document goes to val when a 64-bit mix of its hash and the seed, read as a fraction of 2^64,
is below ``val_fraction``. The decision depends on nothing else (not on the order, the thread
count or the other documents), so it is deterministic, and documents added by a later
incremental run never move an earlier document between splits: val stays stable, it only grows
by the new documents that fall into it. Identical documents (kept with ``--no-dedup``) land in
the same split, so the split cannot leak a training document into val.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from data_io.errors import ConfigError

__all__ = ["check_val_fraction", "is_val"]

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's finaliser: every input bit moves every output bit (wrapping uint64)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def check_val_fraction(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"val_fraction must be a number in [0, 1), got {value!r}")
    return float(value)


def is_val(hashes: NDArray[np.uint64], seed: int, val_fraction: float) -> NDArray[np.bool_]:
    """True for the documents (rows of ``(n, 2)`` hashes) that belong to val."""
    if val_fraction <= 0 or len(hashes) == 0:
        return np.zeros(len(hashes), dtype=np.bool_)
    with np.errstate(over="ignore"):
        key = _mix(np.full(1, seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64))
        mixed = _mix(hashes[:, 0] ^ _mix(hashes[:, 1] ^ key))
    threshold = np.uint64(min(int(val_fraction * 2.0**64), 2**64 - 1))
    return mixed < threshold
