"""The multipack schedule against a plain-Python re-derivation of the HRM-Text algorithm."""

from __future__ import annotations

import numpy as np
import pytest

from data_io.errors import ConfigError, InputError
from data_io.load.packing.multipack import MultipackPlanner, lpt_assign


def naive_lpt_loads(sizes: list[int], bins: int) -> list[int]:
    """LPT with a plain list: largest first into the least loaded bin; the sorted final loads."""
    loads = [0] * bins
    for size in sorted(sizes, reverse=True):
        least = loads.index(min(loads))
        loads[least] += size
    return sorted(loads)


def naive_schedule(lengths: list[int], cap: int, n: int, drop_last: bool) -> list[tuple[int, int]]:
    """(start, count) of every step, written from the description in formats.md §5."""
    steps = []
    start = 0
    while start < len(lengths):
        total, end = 0, start
        while end < len(lengths):  # window: up to and including the row reaching cap * n
            total += lengths[end]
            end += 1
            if total >= cap * n:
                break
        window = lengths[start:end]
        lo, hi = 1, 1 + len(window)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            loads = naive_lpt_loads(window[:mid], n)
            if max(loads) <= cap:
                lo = mid
            else:
                hi = mid
        if lo < n:
            break
        if drop_last and start + lo >= len(lengths):
            break
        steps.append((start, lo))
        start += lo
    return steps


@pytest.mark.parametrize("world", [1, 2, 3, 8])
@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_schedule_matches_reference(world: int, drop_last: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cap = int(rng.choice([64, 100, 256]))
    n_rows = int(rng.integers(50, 400))
    # Mixed short and long rows, some exactly cap long: stresses window ends and ties.
    lengths = rng.integers(1, cap + 1, size=n_rows)
    lengths[rng.random(n_rows) < 0.5] //= 6
    lengths = np.maximum(lengths, 1)
    planner = MultipackPlanner(lengths, cap, world, drop_last=drop_last)
    got = [(b.start, b.count) for b in planner.iter_steps()]
    assert got == naive_schedule(lengths.tolist(), cap, world, drop_last)
    assert planner.num_steps() == len(got)

    for bounds in planner.iter_steps():
        bins = planner.bins(bounds)
        assert len(bins) == world
        rows = np.sort(np.concatenate(bins))
        assert rows.tolist() == list(range(bounds.start, bounds.start + bounds.count))
        loads = sorted(int(lengths[b].sum()) for b in bins)
        assert max(loads) <= cap
        # The loads are LPT's whatever the tie-breaking; every rank gets at least one row.
        assert loads == naive_lpt_loads(lengths[rows].tolist(), world)
        for part in bins:
            assert part.size >= 1
            assert np.all(np.diff(lengths[part]) <= 0)  # filled longest first


def test_lpt_ties_follow_the_original_heap() -> None:
    # Worked by hand: rows taken as 3, 2, 1, 0; the root bin sinks only when strictly larger.
    # 3 -> bin 0 (loads 5,0; bins swap), 2 -> bin 1 (5,5; tie, no swap), 1 -> bin 1 (10,5;
    # swap), 0 -> bin 0.
    bins = lpt_assign(np.array([5, 5, 5, 5]), 2)
    assert [b.tolist() for b in bins] == [[3, 0], [2, 1]]


def test_ranks_partition_each_step_and_summary_accounts_for_every_row() -> None:
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 120, size=1000)
    total_tokens = int(lengths.sum())
    for world in (1, 2, 8):
        planner = MultipackPlanner(lengths, 512, world, drop_last=True)
        summary = planner.summary()
        seen = np.concatenate([np.concatenate(planner.bins(b)) for b in planner.iter_steps()])
        assert len(np.unique(seen)) == seen.size == summary.rows_used
        assert seen.max() == summary.rows_used - 1
        dropped = summary.rows_dropped_last_step + summary.rows_dropped_too_few_rows
        assert summary.rows_used + dropped == lengths.size
        assert summary.tokens_used + summary.tokens_dropped == total_tokens
        assert summary.tokens_used == int(lengths[: summary.rows_used].sum())
        assert 0.5 < summary.efficiency <= 1.0
        assert summary.rows_dropped_last_step > 0  # drop_last dropped the tail step


def test_workers_stride_over_the_same_steps() -> None:
    lengths = np.random.default_rng(1).integers(1, 60, size=500)
    planner = MultipackPlanner(lengths, 128, 2)
    everything = [b.index for b in planner.iter_steps()]
    split = sorted(
        b.index for w in range(3) for b in MultipackPlanner(lengths, 128, 2).iter_steps(w, 3)
    )
    assert split == everything
    assert planner.step(len(everything)) is None


def test_too_few_rows_for_the_ranks_gives_no_step() -> None:
    planner = MultipackPlanner(np.array([3, 3]), 16, 4, drop_last=False)
    assert planner.num_steps() == 0
    assert planner.summary().rows_dropped_too_few_rows == 2


def test_bad_input() -> None:
    with pytest.raises(InputError, match="row 2 has 40 tokens"):
        MultipackPlanner(np.array([3, 4, 40, 5]), 32, 1)
    with pytest.raises(InputError, match="row 1 has packed length 0"):
        MultipackPlanner(np.array([3, 0]), 32, 1)
    with pytest.raises(ConfigError):
        MultipackPlanner(np.array([3]), 0, 1)
    with pytest.raises(ConfigError):
        MultipackPlanner(np.array([3]), 8, 0)
    with pytest.raises(ConfigError):
        MultipackPlanner(np.array([3]), 8, 1).step(-1)
