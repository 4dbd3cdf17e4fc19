"""``MixtureDataset``: several map-style datasets behind one index space.

Index ``i`` belongs to source ``s`` when ``cumulative_sizes[s-1] <= i < cumulative_sizes[s]``
(KempnerForge's layout); ``MixtureSampler`` draws from it by weight. Each item carries
``dataset_idx`` (a 0-d int64 tensor) so the loader can count tokens per source.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from data_io.errors import ConfigError
from data_io.load.dataloader.collate import collate_items, cu_seqlens_from_doc_ids, new_batch_tensor
from data_io.load.dataset_state import MapDatasetState
from data_io.load.protocols import WindowRows, dataset_fingerprint, summary_of

__all__ = ["MixtureDataset"]


def _shape_of(dataset: Any, name: str) -> dict[str, tuple[int, ...]]:
    sample = dataset[0]
    if not isinstance(sample, dict):
        raise ConfigError(f"mixture source {name!r} yields {type(sample).__name__}, not a dict")
    # cu_seqlens varies per sample; everything else must agree for batches to stack.
    return {k: tuple(v.shape) for k, v in sample.items() if k != "cu_seqlens"}


class MixtureDataset(MapDatasetState, Dataset):
    """The concatenation of ``datasets``, named ``names`` (for metrics and phase weights)."""

    def __init__(self, datasets: Sequence[Any], names: Sequence[str] | None = None) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ConfigError("a mixture needs at least one dataset")
        self.names = (
            list(names) if names is not None else [f"source_{i}" for i in range(len(datasets))]
        )
        if len(self.names) != len(self.datasets) or len(set(self.names)) != len(self.names):
            raise ConfigError(f"need one unique name per dataset, got {self.names}")
        sizes = [len(d) for d in self.datasets]
        empty = [n for n, s in zip(self.names, sizes, strict=True) if s == 0]
        if empty:
            raise ConfigError(f"mixture sources without any sample: {', '.join(empty)}")
        self.cumulative_sizes = np.cumsum(sizes).astype(np.int64).tolist()
        # One 0-d tensor per source, made once: torch.tensor() per item costs more than a window.
        self._source_ids = [torch.tensor(i, dtype=torch.int64) for i in range(len(sizes))]
        # Shard sources that agree on their options fill one batch directly (get_batch).
        options = {d.batch_options() if isinstance(d, WindowRows) else None for d in self.datasets}
        self._shared_options = options.pop() if len(options) == 1 else None
        shapes = [_shape_of(d, n) for d, n in zip(self.datasets, self.names, strict=True)]
        for name, shape in zip(self.names[1:], shapes[1:], strict=True):
            if shape != shapes[0]:
                raise ConfigError(
                    f"mixture source {name!r} yields {shape}, but {self.names[0]!r} yields "
                    f"{shapes[0]}; give every source the same seq_len and packing options"
                )

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def locate(self, idx: int) -> tuple[int, int]:
        """(source, index within it) of mixture index ``idx``."""
        if not 0 <= idx < len(self):
            raise IndexError(f"index {idx} out of range for a mixture of {len(self)} samples")
        source = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = self.cumulative_sizes[source - 1] if source else 0
        return source, int(idx - start)

    def __getitem__(self, idx: int) -> dict[str, torch.Tensor]:
        source, local = self.locate(int(idx))
        sample = dict(self.datasets[source][local])
        sample["dataset_idx"] = self._source_ids[source]
        return sample

    def get_batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, torch.Tensor]:
        """The items ``indices``, collated: each source builds its rows as one batch, and the
        rows are placed back in the order asked (``cu_seqlens`` rebuilt for the whole batch)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= len(self):
            raise IndexError(f"indices must be within [0, {len(self)}) and not empty")
        sources = np.searchsorted(self.cumulative_sizes, idx, side="right")
        starts = np.concatenate(([0], self.cumulative_sizes))[sources]
        if self._shared_options is not None:
            out = self._shard_batch(idx - starts, sources)
            out["dataset_idx"] = torch.from_numpy(sources.astype(np.int64))
            return out
        out: dict[str, torch.Tensor] = {}
        with_cu_seqlens = False
        for s in np.unique(sources).tolist():
            rows = np.flatnonzero(sources == s)
            part = collate_items(self.datasets[s], (idx[rows] - starts[rows]).tolist())
            with_cu_seqlens |= part.pop("cu_seqlens", None) is not None
            for key, value in part.items():
                if key not in out:
                    out[key] = new_batch_tensor((idx.shape[0], *value.shape[1:]), value.dtype)
                # numpy's fancy assignment: torch's index_put costs ten times more here.
                out[key].numpy()[rows] = value.numpy()
        if with_cu_seqlens:
            out["cu_seqlens"] = cu_seqlens_from_doc_ids(out["doc_ids"])
        out["dataset_idx"] = torch.from_numpy(sources.astype(np.int64))
        return out

    def _shard_batch(self, local: np.ndarray, sources: np.ndarray) -> dict[str, torch.Tensor]:
        """Shard sources with the same options: every window read straight into one batch,
        packed once."""
        first = self.datasets[0]
        shape = (local.shape[0], first.seq_len - 1)
        inputs, labels = new_batch_tensor(shape), new_batch_tensor(shape)
        for s in np.unique(sources).tolist():
            rows = np.flatnonzero(sources == s)
            self.datasets[s].read_rows(local[rows], inputs.numpy(), labels.numpy(), rows)
        return first.finish_batch(inputs, labels)

    def fingerprint(self) -> str:
        parts = [
            [n, dataset_fingerprint(d)] for n, d in zip(self.names, self.datasets, strict=True)
        ]
        return hashlib.blake2b(json.dumps(parts).encode(), digest_size=16).hexdigest()

    def summary(self) -> dict[str, Any]:
        return {name: summary_of(d) for name, d in zip(self.names, self.datasets, strict=True)}
