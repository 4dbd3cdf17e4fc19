"""collate_samples: stacked tensors, and cu_seqlens joined into the flattened batch's boundaries."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from data_io.load import collate_samples
from data_io.load.datasets.shards import pack_window


def oracle_cu_seqlens(windows: list[np.ndarray], eos: int) -> list[int]:
    """Document starts over the concatenated inputs, by walking token by token."""
    starts, position = [], 0
    for window in windows:
        inputs = window[:-1]
        for i in range(len(inputs)):
            if i == 0 or inputs[i - 1] == eos:
                starts.append(position + i)
        position += len(inputs)
    return [*starts, position]


@pytest.mark.parametrize("seed", range(5))
def test_cu_seqlens_of_a_batch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    windows = [rng.choice([0, 1, 2, 3], size=17, p=[0.2, 0.3, 0.3, 0.2]) for _ in range(4)]
    samples = [pack_window(w, 0, position_ids=True, cu_seqlens=True) for w in windows]
    batch = collate_samples(samples)
    assert batch["cu_seqlens"].dtype == torch.int32
    assert batch["cu_seqlens"].tolist() == oracle_cu_seqlens(windows, 0)
    assert batch["input_ids"].shape == (4, 16)
    assert torch.equal(batch["position_ids"][2], samples[2]["position_ids"])


def test_empty_batch() -> None:
    with pytest.raises(ValueError, match="empty"):
        collate_samples([])
