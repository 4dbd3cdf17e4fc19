"""Exact resume: stop after any step, resume, and get exactly the batches an unbroken run gives."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from sampled_fixture import Sampled, write_sampled

from data_io.errors import ConfigError
from data_io.load import ResumableDataLoader, SampledDataset

pytestmark = [
    pytest.mark.filterwarnings("ignore:This DataLoader will create"),
    pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true"),
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated"),  # inside torchdata 0.11
]

SETTINGS = [
    {"layout": "prefixlm_packed", "batch_max_length": 96, "rank": 1, "world_size": 2},
    {"layout": "causal_padded", "batch_size": 4, "rank": 0, "world_size": 3},
]


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Sampled:
    # Rows repeat (as with the sampler's `repeat`), so batches with the same rows can recur:
    # comparing whole sequences, not sets, is what catches a misplaced resume.
    return write_sampled(tmp_path_factory.mktemp("sampled"), n_rows=90, epochs=2, repeat=2)


def same(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True)
    )


def full_run(sampled: Sampled, settings: dict) -> list[dict[str, torch.Tensor]]:
    return list(SampledDataset(sampled.path, epoch=1, **settings))


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("workers", [0, 1, 3])
def test_resumable_dataloader_any_point(sampled: Sampled, settings: dict, workers: int) -> None:
    reference = full_run(sampled, settings)
    assert len(reference) > 8
    rng = random.Random(workers)
    points = sorted(
        {0, 1, len(reference) - 1, len(reference), *rng.sample(range(2, len(reference) - 1), 4)}
    )
    for stop in points:
        loader = ResumableDataLoader(
            SampledDataset(sampled.path, epoch=1, **settings), num_workers=workers
        )
        it = iter(loader)
        head = [next(it) for _ in range(stop)]
        state = loader.state_dict()
        del it, loader
        # Resume with a different number of workers: the saved position is the global step.
        resumed = ResumableDataLoader(
            SampledDataset(sampled.path, epoch=1, **settings), num_workers=(workers + 1) % 4
        )
        resumed.load_state_dict(state)
        assert resumed.state_dict()["base_step"] == stop  # loaded, not yet iterated
        tail = list(resumed)
        assert same(head + tail, reference), f"stop={stop}"
        assert resumed.state_dict()["base_step"] == len(reference)


@pytest.mark.parametrize("settings", SETTINGS)
def test_dataset_state_in_process(sampled: Sampled, settings: dict) -> None:
    reference = full_run(sampled, settings)
    for stop in (0, 3, len(reference) - 2):
        ds = SampledDataset(sampled.path, epoch=1, **settings)
        it = iter(ds)
        head = [next(it) for _ in range(stop)]
        state = ds.state_dict()
        fresh = SampledDataset(sampled.path, epoch=0, **settings)  # the state switches the epoch
        fresh.load_state_dict(state)
        assert fresh.epoch == 1
        assert same(head + list(fresh), reference)


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("workers", [0, 1, 3])
def test_torchdata_stateful_dataloader(sampled: Sampled, settings: dict, workers: int) -> None:
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    reference = full_run(sampled, settings)
    rng = random.Random(10 + workers)
    for stop in sorted({1, len(reference) - 1, *rng.sample(range(2, len(reference) - 1), 3)}):
        loader = stateful.StatefulDataLoader(
            SampledDataset(sampled.path, epoch=1, **settings), batch_size=None, num_workers=workers
        )
        head = []
        it = iter(loader)
        for _ in range(stop):
            head.append(next(it))
        state = loader.state_dict()
        del it, loader
        resumed = stateful.StatefulDataLoader(
            SampledDataset(sampled.path, epoch=1, **settings), batch_size=None, num_workers=workers
        )
        resumed.load_state_dict(state)
        assert same(head + list(resumed), reference), f"stop={stop}"


def test_state_for_other_settings_is_refused(sampled: Sampled) -> None:
    ds = SampledDataset(sampled.path, batch_max_length=96)
    state = ds.state_dict()
    other = SampledDataset(sampled.path, batch_max_length=128)
    with pytest.raises(ConfigError, match="batch_max_length: saved 96, now 128"):
        other.load_state_dict(state)
    with pytest.raises(ConfigError, match="not a SampledDataset state"):
        ds.load_state_dict({"step": 3})
    # A worker's own state resumes only that worker.
    worker_state = dict(state, num_workers=3, worker_id=1)
    ds.load_state_dict(worker_state)
    with pytest.raises(ConfigError, match="worker 1 of 3"):
        next(iter(ds))


def test_state_refused_after_resampling(sampled: Sampled, tmp_path: Path) -> None:
    small = write_sampled(tmp_path, n_rows=60, epochs=2)
    state = SampledDataset(sampled.path, batch_max_length=96).state_dict()
    with pytest.raises(ConfigError, match="they hold different samples"):
        SampledDataset(small.path, batch_max_length=96).load_state_dict(state)
    # Without the folder check, the row count still tells this rebuild apart.
    with pytest.raises(ConfigError, match="the sampled folder was rebuilt"):
        SampledDataset(small.path, batch_max_length=96).load_state_dict(state, check_folder=False)


def test_resumable_dataloader_refuses_misuse(sampled: Sampled) -> None:
    ds = SampledDataset(sampled.path, batch_max_length=96)
    with pytest.raises(ConfigError, match="persistent_workers"):
        ResumableDataLoader(ds, num_workers=1, persistent_workers=True)
    with pytest.raises(ConfigError, match="batch_size must stay None"):
        ResumableDataLoader(ds, batch_size=4)
