"""DistributedSampler and MixtureSampler: ranks partition one global order, seeded per epoch."""

from __future__ import annotations

import json

import numpy as np
import pytest

from data_io.errors import ConfigError
from data_io.load import DistributedSampler, MixtureSampler
from data_io.load.order.samplers import ShuffledOrder


@pytest.mark.parametrize(("n", "world"), [(10, 1), (10, 3), (100, 8), (7, 7)])
@pytest.mark.parametrize("drop_last", [True, False])
def test_ranks_partition_the_epoch(n: int, world: int, drop_last: bool) -> None:
    per_rank = [
        list(DistributedSampler(range(n), world, r, seed=3, drop_last=drop_last))
        for r in range(world)
    ]
    lengths = {len(p) for p in per_rank}
    assert len(lengths) == 1
    assert [
        len(DistributedSampler(range(n), world, r, drop_last=drop_last)) for r in range(world)
    ] == [len(p) for p in per_rank]
    flat = [i for p in per_rank for i in p]
    if drop_last:
        assert len(flat) == n - n % world and len(set(flat)) == len(flat)
    else:
        assert set(flat) == set(range(n)) and len(flat) == -(-n // world) * world
    # Interleaving the ranks gives back the global order (stride over ranks).
    order = ShuffledOrder(n, 3).indices(0, np.arange(len(flat)) % n).tolist()
    assert [per_rank[k % world][k // world] for k in range(len(flat))] == order


def test_epochs_reshuffle_and_repeat_deterministically() -> None:
    sampler = DistributedSampler(range(50), 1, 0, seed=1)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert sorted(first) == sorted(second) == list(range(50)) and first != second
    again = DistributedSampler(range(50), 1, 0, seed=1)
    again.set_epoch(1)
    assert list(again) == second
    plain = DistributedSampler(range(50), 2, 1, shuffle=False)
    assert list(plain) == list(range(1, 50, 2))


def test_distributed_sampler_state_resumes_with_another_world_size() -> None:
    full = list(DistributedSampler(range(40), 1, 0, seed=9))
    resumed = []
    for rank in range(4):
        s = DistributedSampler(range(40), 4, rank, seed=9)
        s.load_state_dict({"epoch": 0, "position": 12, "seed": 9})
        resumed.append(list(s))
    assert [resumed[k % 4][k // 4] for k in range(28)] == full[12:]
    with pytest.raises(ConfigError, match="seed 8"):
        DistributedSampler(range(40), 1, 0, seed=9).load_state_dict(
            {"epoch": 0, "position": 0, "seed": 8}
        )
    with pytest.raises(ConfigError, match="not a DistributedSampler state"):
        DistributedSampler(range(40), 1, 0).load_state_dict({"epoch": 0})


def test_a_mixture_smaller_than_one_step_is_refused_not_an_empty_epoch() -> None:
    with pytest.raises(
        ConfigError, match=r"one step takes 10 samples .* an epoch of the mixture has 9"
    ):
        MixtureSampler([5, 9], [1, 1], 1, 0, batch_size=10)
    with pytest.raises(ConfigError, match=r"batch_size 5 x num_replicas 2"):
        MixtureSampler([5, 9], [1, 1], 2, 0, batch_size=5)
    assert len(list(MixtureSampler([5, 9], [1, 1], 1, 0, batch_size=9))) == 9


def test_mixture_sampler_indices_and_phases() -> None:
    cumulative = [100, 150, 400]  # sizes 100, 50, 250
    sampler = MixtureSampler(
        cumulative,
        [1, 1, 2],
        num_replicas=2,
        rank=0,
        batch_size=5,
        names=["a", "b", "c"],
        phases=[{"start_step": 10, "dataset_weights": {"a": 0, "b": 1, "c": 0}, "lr_scale": 0.1}],
    )
    assert len(sampler) == 400 // 10 * 5
    assert sampler.current_phase == 0 and sampler.lr_scale == 1.0
    other = MixtureSampler(
        cumulative,
        [1, 1, 2],
        num_replicas=2,
        rank=1,
        batch_size=5,
        names=["a", "b", "c"],
        phases=[{"start_step": 10, "dataset_weights": {"a": 0, "b": 1, "c": 0}, "lr_scale": 0.1}],
    )
    mine, theirs = list(sampler), list(other)
    assert sampler.current_phase == 1 and sampler.lr_scale == 0.1
    source = np.searchsorted(cumulative, np.array(mine + theirs), side="right")
    steps = np.array([k // 5 for k in range(len(mine))] * 2)
    # From step 10 on only "b" is drawn; before it every source appears.
    assert set(source[steps >= 10].tolist()) == {1}
    assert set(source[steps < 10].tolist()) == {0, 1, 2}
    # Within one pass over "b" (50 samples) no index repeats.
    b_draws = [i for i, s in zip(mine + theirs, source, strict=True) if s == 1]
    assert len(b_draws) > 50
    # Ranks take disjoint halves of every step.
    for step in range(len(mine) // 5):
        a, b = mine[step * 5 : step * 5 + 5], theirs[step * 5 : step * 5 + 5]
        assert len(set(a) | set(b)) == 10 or step >= 10


def test_mixture_sampler_bad_input() -> None:
    with pytest.raises(ConfigError, match="every mixture source needs samples"):
        MixtureSampler([10, 10], [1, 1], 1, 0)
    with pytest.raises(ConfigError, match="weight must be > 0"):
        MixtureSampler([10, 20], [1, 0], 1, 0)
    with pytest.raises(ConfigError, match="rank"):
        MixtureSampler([10, 20], [1, 1], 2, 2)
    with pytest.raises(ConfigError, match="both rank and world_size"):
        MixtureSampler([10, 20], [1, 1], 2, None)
    sampler = MixtureSampler([10, 20], [1, 1], 1, 0)
    with pytest.raises(ConfigError, match="not a MixtureSampler state"):
        sampler.load_state_dict({"epoch": 0})
    other = MixtureSampler([10, 20], [1, 1], 1, 0, seed=5)
    with pytest.raises(ConfigError, match="seed saved 5, now 0"):
        sampler.load_state_dict(other.state_dict())


def test_mixture_sampler_runs_epoch_after_epoch_and_resumes() -> None:
    def make() -> MixtureSampler:
        return MixtureSampler([100, 150], [1, 2], 2, 1, seed=3, batch_size=4)

    sampler = make()
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        epochs.append(list(sampler))
    assert [len(e) for e in epochs] == [150 // 8 * 4] * 3
    assert epochs[0] != epochs[1]  # the sources' passes run on
    resumed = make()
    resumed.load_state_dict(json.loads(json.dumps(_after_one_epoch())))
    resumed.set_epoch(1)  # the training loop calls it after loading: a no-op here
    assert list(resumed) == epochs[1]


def _after_one_epoch() -> dict:
    sampler = MixtureSampler([100, 150], [1, 2], 2, 1, seed=3, batch_size=4)
    sampler.set_epoch(0)
    list(sampler)
    sampler.set_epoch(1)
    return sampler.state_dict()


def test_distributed_sampler_records_its_progress() -> None:
    sampler = DistributedSampler(range(40), 2, 1, seed=9)
    it = iter(sampler)
    taken = [next(it) for _ in range(5)]
    state = sampler.state_dict()
    assert state["position"] == 10  # five rounds of two ranks
    resumed = DistributedSampler(range(40), 2, 1, seed=9)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)  # the same epoch: the position is kept
    assert taken + list(resumed) == list(DistributedSampler(range(40), 2, 1, seed=9))
    resumed.set_epoch(1)
    assert resumed.state_dict()["position"] == 0
