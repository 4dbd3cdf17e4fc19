"""Whole-batch fetching agrees with fetching items one by one and collating them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from data_io.load import MemoryMappedDataset, MixtureDataset, collate_samples
from data_io.load.dataloader.collate import BatchedView, collate_items

EOS = 3


def write_source(folder: Path, seed: int, sizes: list[int], dtype: str) -> Path:
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i, size in enumerate(sizes):
        tokens = rng.choice([EOS, 4, 5, 6, 7, 8], size=size, p=[0.15, 0.17, 0.17, 0.17, 0.17, 0.17])
        np.save(folder / f"s{i}.npy", tokens.astype(dtype))
    return folder


OPTIONS = [
    {},
    {"pack_sequences": True, "eos_token_id": EOS},
    {"pack_sequences": True, "eos_token_id": EOS, "position_ids": True, "cu_seqlens": True},
]


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == b[key].dtype, key
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("options", OPTIONS)
def test_shard_batch_equals_collated_items(tmp_path: Path, options: dict) -> None:
    ds = MemoryMappedDataset(
        write_source(tmp_path / "a", 0, [100, 57, 230], "uint16"), 11, **options
    )
    rng = np.random.default_rng(1)
    for _ in range(10):
        picks = rng.integers(0, len(ds), int(rng.integers(1, 9))).tolist()
        assert_same(ds.get_batch(picks), collate_samples([ds[i] for i in picks]))


@pytest.mark.parametrize("options", OPTIONS)
def test_mixture_batch_equals_collated_items(tmp_path: Path, options: dict) -> None:
    parts = [
        MemoryMappedDataset(write_source(tmp_path / "a", 0, [90, 40], "uint16"), 9, **options),
        MemoryMappedDataset(write_source(tmp_path / "b", 1, [150], "uint32"), 9, **options),
    ]
    mix = MixtureDataset(parts, ["a", "b"])
    rng = np.random.default_rng(2)
    for _ in range(10):
        picks = rng.integers(0, len(mix), int(rng.integers(1, 9))).tolist()
        assert_same(mix.get_batch(picks), collate_samples([mix[i] for i in picks]))


def test_batched_view_and_fallback(tmp_path: Path) -> None:
    ds = MemoryMappedDataset(write_source(tmp_path / "a", 0, [100], "uint16"), 11)
    view = BatchedView(ds)
    assert len(view) == len(ds)
    assert_same(view.__getitems__([3, 1])[0], ds.get_batch([3, 1]))
    assert_same(view[2], ds.get_batch([2]))

    class ItemsOnly(torch.utils.data.Dataset):  # a dataset without get_batch
        def __len__(self) -> int:
            return len(ds)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return ds[i]

    assert_same(collate_items(ItemsOnly(), [4, 0]), ds.get_batch([4, 0]))


def test_bad_batch_indices(tmp_path: Path) -> None:
    ds = MemoryMappedDataset(write_source(tmp_path / "a", 0, [100], "uint16"), 11)
    with pytest.raises(ValueError, match="at least one index"):
        ds.get_batch([])
    with pytest.raises(IndexError):
        ds.get_batch([len(ds)])
    with pytest.raises(IndexError):
        MixtureDataset([ds], ["a"]).get_batch([-1])


def test_mixture_of_sources_with_other_options(tmp_path: Path) -> None:
    # Different EOS ids: each source packs its own rows (the general path), not one shared batch.
    parts = [
        MemoryMappedDataset(
            write_source(tmp_path / "a", 0, [90], "uint16"),
            9,
            pack_sequences=True,
            eos_token_id=EOS,
        ),
        MemoryMappedDataset(
            write_source(tmp_path / "b", 1, [150], "uint16"), 9, pack_sequences=True, eos_token_id=4
        ),
    ]
    mix = MixtureDataset(parts, ["a", "b"])
    assert mix._shared_options is None
    picks = [0, len(parts[0]) + 2, 1, len(parts[0])]
    assert_same(mix.get_batch(picks), collate_samples([mix[i] for i in picks]))
    labels = mix.get_batch(picks)["labels"]
    inputs = mix.get_batch(picks)["input_ids"]
    assert bool((labels[0][inputs[0] == EOS] == -100).all())
    assert bool((labels[1][inputs[1] == 4] == -100).all())
