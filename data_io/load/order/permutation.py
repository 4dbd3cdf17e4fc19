"""A seeded random permutation of ``range(n)`` that needs no index array.

Shuffling a 1-trillion-token folder of 4,096-token windows with ``torch.randperm`` would build a
244M-entry array (2 GB, seconds) at every epoch and on every resume. ``IndexPermutation`` maps a
position to an index instead, in O(1) time and memory: a balanced Feistel network over the
smallest power of four ≥ n is a bijection of that domain, and "cycle walking" (applying it again
while the result is ≥ n) restricts it to a bijection of ``range(n)``. Each round mixes with the
splitmix64 finaliser keyed by a ``numpy.random.SeedSequence`` draw, so the permutation depends
on ``(seed, *stream)`` only, is the same on every machine, and any position is reachable
directly: resuming in the middle of an epoch costs nothing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["IndexPermutation"]

_ROUNDS = 6
# Consecutive positions are computed a block at a time and kept: numpy's cost per call, not per
# element, dominates for the few positions of one training step.
BLOCK = 8192
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a fast, well-spread 64-bit hash (uint64 arithmetic wraps)."""
    z = values.copy()
    z ^= z >> np.uint64(30)
    z *= _MIX1
    z ^= z >> np.uint64(27)
    z *= _MIX2
    z ^= z >> np.uint64(31)
    return z


class IndexPermutation:
    """``perm[positions]`` for a seeded permutation ``perm`` of ``range(n)``."""

    def __init__(self, n: int, seed: int, *stream: int) -> None:
        if n < 1:
            raise ValueError(f"a permutation needs n >= 1, got {n}")
        self.n = int(n)
        half = max(1, (max(1, (self.n - 1).bit_length()) + 1) // 2)
        self._half = np.uint64(half)
        self._mask = np.uint64((1 << half) - 1)
        entropy = [int(seed) & (2**64 - 1), *(int(s) for s in stream)]
        self._keys = np.random.SeedSequence(entropy).generate_state(_ROUNDS, dtype=np.uint64)
        self._block: tuple[int, np.ndarray] | None = None

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        for key in self._keys:
            left, right = right, left ^ (_mix(right ^ key) & self._mask)
        return (left << self._half) | right

    def __call__(self, positions: np.ndarray | int) -> np.ndarray:
        """The indices at ``positions`` (int64, each in ``range(n)``)."""
        given = np.asarray(positions, dtype=np.int64)
        pos = given.reshape(-1)
        if pos.size and (pos.min() < 0 or pos.max() >= self.n):
            raise IndexError(f"positions must lie in [0, {self.n})")
        out = self._encrypt(pos.astype(np.uint64))
        # The domain is at most 4n, so each walk step leaves a value out of range with p <= 3/4.
        outside = out >= np.uint64(self.n)
        while outside.any():
            out[outside] = self._encrypt(out[outside])
            outside = out >= np.uint64(self.n)
        return out.astype(np.int64).reshape(given.shape)

    def _cached_block(self, block: int) -> np.ndarray:
        if self._block is None or self._block[0] != block:
            start = block * BLOCK
            self._block = (block, self(np.arange(start, min(self.n, start + BLOCK))))
        return self._block[1]

    def range(self, start: int, stop: int) -> np.ndarray:
        """``perm[start:stop]``, through a cached block of ``BLOCK`` positions."""
        if not 0 <= start <= stop <= self.n:
            raise IndexError(f"range [{start}, {stop}) is not within [0, {self.n})")
        parts = []
        at = start
        while at < stop:
            block = at // BLOCK
            end = min(stop, (block + 1) * BLOCK)
            parts.append(self._cached_block(block)[at - block * BLOCK : end - block * BLOCK])
            at = end
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
