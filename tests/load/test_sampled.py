"""SampledDataset batches against a plain-Python re-derivation from the sampled arrays."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from sampled_fixture import ROW_TAG, Sampled, write_sampled
from torch.utils.data import DataLoader

from data_io.errors import InputError
from data_io.load import SCALAR_KEYS, SampledDataset, format_batch, split_scalars
from data_io.load.packing.multipack import MultipackPlanner

IGNORE = -100
# This machine has 2 cores; 3 workers are on purpose (uneven split of the steps).
pytestmark = [
    pytest.mark.filterwarnings("ignore:This DataLoader will create"),
    pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true"),
]


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Sampled:
    return write_sampled(tmp_path_factory.mktemp("sampled"), n_rows=300, epochs=2)


def epoch_rows(s: Sampled, epoch: int) -> list[tuple[list[int], list[int]]]:
    """(instruction, response) token lists of every epoch row, read the slow way."""
    edir = s.path / f"epoch_{epoch}"
    cols = {
        n: np.load(edir / f"{n}.npy").tolist()
        for n in ("inst_start", "inst_len", "resp_start", "resp_len")
    }
    pool = s.tokens.tolist()
    out = []
    for ist, il, rst, rl in zip(
        cols["inst_start"], cols["inst_len"], cols["resp_start"], cols["resp_len"], strict=True
    ):
        out.append((pool[ist : ist + il], pool[rst : rst + rl]))
    return out


def expected_packed(
    rows: list[tuple[list[int], list[int]]], cap: int, target_only: bool
) -> dict[str, list[int]]:
    """formats.md §5 written out row by row."""
    inputs, labels, positions, prefix, causal = [], [], [], [], []
    for i, o in rows:
        inputs += i + o[:-1]
        labels += ([IGNORE] * (len(i) - 1) if target_only else i[1:]) + o
        positions += list(range(len(i) + len(o) - 1))
        prefix.append(len(i))
        causal.append(len(o) - 1)
    used = len(inputs)
    cu = [0]
    for p, c in zip(prefix, causal, strict=True):
        cu.append(cu[-1] + p + c)
    pad = cap - used
    return {
        "input_ids": inputs + [0] * pad,
        "labels": labels + [IGNORE] * pad,
        "position_ids": positions + [0] * pad,
        "cu_seqlens": cu + [0] * (cap - len(cu)),
        "prefix_lens": prefix + [0] * (cap - len(prefix)),
        "causal_lens": causal + [0] * (cap - len(causal)),
        "total_seqlen": used,
        "numseqs": len(rows),
        "max_seqlen_prefix": max(prefix),
        "max_seqlen_causal": max(causal),
        "max_seqlen_all": max(p + c for p, c in zip(prefix, causal, strict=True)),
    }


def tags_in_packed(batch: dict[str, torch.Tensor]) -> list[int]:
    """Pool rows of a packed batch, from the tag token after each row's BOQ."""
    cu = batch["cu_seqlens"].tolist()[: int(batch["numseqs"]) + 1]
    ids = batch["input_ids"].tolist()
    return [ids[a + 1] - ROW_TAG for a in cu[:-1]]


@pytest.mark.parametrize("target_only", [True, False])
@pytest.mark.parametrize("world", [1, 2, 8])
def test_packed_batches_match_rederivation(sampled: Sampled, target_only: bool, world: int) -> None:
    cap = 256
    rows = epoch_rows(sampled, 1)
    lengths = np.array([len(i) + len(o) - 1 for i, o in rows])
    planner = MultipackPlanner(lengths, cap, world)  # the schedule is tested in test_packing
    for rank in range(world):
        ds = SampledDataset(
            sampled.path,
            epoch=1,
            batch_max_length=cap,
            rank=rank,
            world_size=world,
            target_only=target_only,
        )
        batches = list(ds)
        assert len(batches) == planner.num_steps() == ds.num_steps()
        for bounds, batch in zip(planner.iter_steps(), batches, strict=True):
            mine = planner.bins(bounds)[rank]
            want = expected_packed([rows[r] for r in mine], cap, target_only)
            assert set(batch) == set(want)
            for key, value in want.items():
                got = batch[key]
                assert got.tolist() == value, key
                if key in SCALAR_KEYS:
                    assert got.ndim == 0 and got.dtype == torch.int64
                else:
                    assert got.shape == (cap,) and got.dtype == torch.int32


def test_packed_invariants_hold_row_by_row(sampled: Sampled) -> None:
    """The layout's rules checked directly on the tensors, independent of any expected batch."""
    ds = SampledDataset(sampled.path, epoch=0, batch_max_length=300, target_only=False)
    for batch in ds:
        cu = batch["cu_seqlens"][: int(batch["numseqs"]) + 1].tolist()
        assert cu[0] == 0 and cu[-1] == int(batch["total_seqlen"])
        prefix = batch["prefix_lens"].tolist()
        causal = batch["causal_lens"].tolist()
        assert sum(prefix) + sum(causal) == cu[-1]
        ids, labels, pos = batch["input_ids"], batch["labels"], batch["position_ids"]
        for k, (a, b) in enumerate(itertools.pairwise(cu)):
            assert b - a == prefix[k] + causal[k]
            assert pos[a:b].tolist() == list(range(b - a))
            # Labels are the inputs shifted by one inside the row (target_only=False).
            assert labels[a : b - 1].tolist() == ids[a + 1 : b].tolist()
        end = cu[-1]
        assert not ids[end:].any() and not pos[end:].any()
        assert (labels[end:] == IGNORE).all()


def test_every_row_once_across_ranks_and_workers(sampled: Sampled) -> None:
    order = sampled.epochs[0]
    for world in (1, 2, 8):
        seen: list[int] = []
        steps = set()
        for rank in range(world):
            ds = SampledDataset(sampled.path, batch_max_length=200, rank=rank, world_size=world)
            loader = DataLoader(ds, batch_size=None, num_workers=3 if rank == 0 else 0)
            batches = list(loader)
            steps.add(len(batches))
            seen += [t for b in batches for t in tags_in_packed(b)]
        assert len(steps) == 1  # every rank runs the same number of steps
        summary = ds.summary()
        assert len(seen) == len(set(seen)) == summary["rows_used"]
        # Exactly the epoch's first rows_used rows; the rest is the documented drop.
        assert sorted(seen) == sorted(order[: summary["rows_used"]].tolist())
        assert summary["rows_used"] + sum(summary["rows_dropped"].values()) == len(order)


@pytest.mark.parametrize("workers", [1, 3])
def test_workers_keep_step_order_and_pin_memory(sampled: Sampled, workers: int) -> None:
    ds = SampledDataset(sampled.path, batch_max_length=128)
    reference = list(ds)
    loader = DataLoader(ds, batch_size=None, num_workers=workers, pin_memory=True)
    got = list(loader)
    assert len(got) == len(reference)
    for a, b in zip(got, reference, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in b)
    again = list(ds)  # a finished dataset iterated again starts the epoch over
    assert len(again) == len(reference) and torch.equal(again[0]["labels"], reference[0]["labels"])


def test_determinism_and_random_access(sampled: Sampled) -> None:
    a = SampledDataset(sampled.path, batch_max_length=128, rank=1, world_size=2)
    b = SampledDataset(sampled.path, batch_max_length=128, rank=1, world_size=2)
    first, second = list(a), list(b)
    assert len(first) == len(second) > 3
    for step, (x, y) in enumerate(zip(first, second, strict=True)):
        assert all(torch.equal(x[k], y[k]) for k in x)
        z = a.batch_at(step)
        assert all(torch.equal(x[k], z[k]) for k in x)
    with pytest.raises(IndexError):
        a.batch_at(len(first))


def test_split_response_storage(tmp_path: Path) -> None:
    """Responses stored away from their instructions are gathered from the right place."""
    s = write_sampled(tmp_path, n_rows=80, epochs=1, split_response=True, dtype="int32")
    rows = epoch_rows(s, 0)
    lengths = np.array([len(i) + len(o) - 1 for i, o in rows])
    planner = MultipackPlanner(lengths, 100, 1)
    ds = SampledDataset(s.path, batch_max_length=100)
    for bounds, batch in zip(planner.iter_steps(), ds, strict=True):
        want = expected_packed([rows[r] for r in planner.bins(bounds)[0]], 100, True)
        assert batch["input_ids"].tolist() == want["input_ids"]
        assert batch["labels"].tolist() == want["labels"]


def expected_padded(
    rows: list[tuple[list[int], list[int]]], width: int, target_only: bool
) -> dict[str, list[list[int]]]:
    out: dict[str, list[list[int]]] = {"input_ids": [], "labels": [], "attention_mask": []}
    for i, o in rows:
        seq = i + o
        pad = width - len(seq)
        out["input_ids"].append(seq + [0] * pad)
        out["labels"].append(([IGNORE] * len(i) if target_only else i) + o + [IGNORE] * pad)
        out["attention_mask"].append([1] * len(seq) + [0] * pad)
    return out


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("target_only", [True, False])
def test_causal_padded_matches_rederivation(
    sampled: Sampled, fixed: bool, target_only: bool
) -> None:
    rows = epoch_rows(sampled, 0)
    world, size = 2, 16
    seen = []
    for rank in range(world):
        ds = SampledDataset(
            sampled.path,
            layout="causal_padded",
            batch_size=size,
            rank=rank,
            world_size=world,
            target_only=target_only,
            fixed_length=fixed,
        )
        batches = list(ds)
        assert len(batches) == len(rows) // (size * world) == ds.num_steps()
        for step, batch in enumerate(batches):
            mine = list(range((step * world + rank) * size, (step * world + rank + 1) * size))
            seen += mine
            picked = [rows[r] for r in mine]
            width = ds.batch_max_length if fixed else max(len(i) + len(o) for i, o in picked)
            want = expected_padded(picked, width, target_only)
            assert set(batch) == set(want)
            for key, value in want.items():
                assert batch[key].dtype == torch.int64
                assert batch[key].tolist() == value, key
    assert sorted(seen) == list(range(len(seen)))
    assert (
        len(rows) - len(seen) == ds.summary()["rows_dropped"]["incomplete_last_step"] < size * world
    )


def test_rank_from_torch_distributed(sampled: Sampled, tmp_path: Path) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rdzv'}", rank=0, world_size=1)
    try:
        ds = SampledDataset(sampled.path, batch_max_length=128)
        assert (ds.rank, ds.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()


def test_pickles_small_and_helpers(sampled: Sampled) -> None:
    ds = SampledDataset(sampled.path, batch_max_length=128)
    batch = next(iter(ds))
    blob = pickle.dumps(ds)
    assert len(blob) < 20_000  # no memory map copied into the pickle
    again = pickle.loads(blob)
    assert torch.equal(next(iter(again))["input_ids"], batch["input_ids"])
    tensors, scalars = split_scalars(batch)
    assert set(scalars) == set(SCALAR_KEYS) and not set(tensors) & set(SCALAR_KEYS)
    assert scalars["numseqs"] == int(batch["numseqs"])
    text = format_batch(batch)
    assert "input_ids" in text and "cu_seqlens" in text


def test_spawned_worker_matches_in_process(sampled: Sampled) -> None:
    """Workers started with spawn (no inherited memory maps) build the same batches."""
    ds = SampledDataset(sampled.path, batch_max_length=128, rank=0, world_size=2)
    reference = list(ds)
    loader = DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="spawn")
    got = list(loader)
    assert len(got) == len(reference)
    for a, b in zip(got, reference, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in b)


def test_set_epoch_switches_and_checks(sampled: Sampled) -> None:
    ds = SampledDataset(sampled.path, epoch=0, batch_max_length=128)
    first_of_0 = next(iter(ds))
    ds.set_epoch(1)
    assert ds.epoch == 1
    want = next(iter(SampledDataset(sampled.path, epoch=1, batch_max_length=128)))
    got = next(iter(ds))
    assert torch.equal(got["input_ids"], want["input_ids"])
    assert not torch.equal(got["input_ids"], first_of_0["input_ids"])
    with pytest.raises(InputError, match="epoch 2 was not sampled"):
        ds.set_epoch(2)


def test_the_trainers_import_path_still_works():
    """The HRM-Text trainer imports from data_io.loader; it must be the same objects."""
    import data_io.load as load
    import data_io.loader as loader

    assert "SampledDataset" in loader.__all__
    for name in loader.__all__:
        assert getattr(loader, name) is getattr(load, name), name
