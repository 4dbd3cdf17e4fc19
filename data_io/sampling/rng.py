"""numpy's ``Generator(Philox(seed))`` for the sampler's two calls, run by the Rust core.

The epoch arrays must be those of the original sampler, element for element, and they come
from one serial chain of ``shuffle``/``permutation`` calls on one Philox generator
(formats.md §4). ``rust/sampling/philox.rs`` reproduces those calls bit for bit, 2.4x faster
than numpy on an epoch-sized array (it prefetches the swap partners; arrays that fit the cache
shuffle at numpy's speed), without the GIL. The state is numpy's, so it can be handed back
(``state``) and the chain continued in numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from data_io import _core


class PhiloxShuffler:
    """``shuffle`` and ``permutation`` of ``np.random.Generator(np.random.Philox(seed))``."""

    def __init__(self, seed: int | None = None, *, state: dict[str, Any] | None = None) -> None:
        if state is None:
            state = np.random.Philox(seed).state
        inner = state["state"]
        self._core = _core.Philox(
            (
                [int(word) for word in inner["counter"]],
                [int(word) for word in inner["key"]],
                [int(word) for word in state["buffer"]],
                int(state["buffer_pos"]),
                bool(state["has_uint32"]),
                int(state["uinteger"]),
            )
        )

    def shuffle(self, array: np.ndarray) -> None:
        """Shuffle a contiguous 1-D int64 array in place (``Generator.shuffle``)."""
        self._core.shuffle(array)

    def permutation(self, n: int) -> np.ndarray:
        """``Generator.permutation(n)``: numpy shuffles ``arange(n)``, so this does too."""
        values = np.arange(n, dtype=np.int64)
        self._core.shuffle(values)
        return values

    @property
    def state(self) -> dict[str, Any]:
        """The state in numpy's format (``np.random.Philox().state = ...`` accepts it)."""
        counter, key, buffer, buffer_pos, has_uint32, uinteger = self._core.state()
        return {
            "bit_generator": "Philox",
            "state": {
                "counter": np.array(counter, dtype=np.uint64),
                "key": np.array(key, dtype=np.uint64),
            },
            "buffer": np.array(buffer, dtype=np.uint64),
            "buffer_pos": buffer_pos,
            "has_uint32": int(has_uint32),
            "uinteger": uinteger,
        }
