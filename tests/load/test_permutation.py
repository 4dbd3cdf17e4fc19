"""IndexPermutation: a bijection of range(n), random access, seeded, and spread evenly."""

from __future__ import annotations

import numpy as np
import pytest

from data_io.load.order.permutation import IndexPermutation


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 1000, 4097])
def test_is_a_permutation(n: int) -> None:
    values = IndexPermutation(n, 11)(np.arange(n))
    assert sorted(values.tolist()) == list(range(n))


def test_random_access_agrees_with_the_whole() -> None:
    perm = IndexPermutation(10_000, 3, 1)
    whole = perm(np.arange(10_000))
    picks = np.array([0, 9_999, 17, 5_000, 17])
    assert perm(picks).tolist() == whole[picks].tolist()
    assert int(perm(42)) == int(whole[42])
    assert perm(np.arange(12).reshape(3, 4)).shape == (3, 4)


def test_seed_and_stream_change_the_order_deterministically() -> None:
    n = 1000
    base = IndexPermutation(n, 5)(np.arange(n))
    assert IndexPermutation(n, 5)(np.arange(n)).tolist() == base.tolist()
    for other in (IndexPermutation(n, 6), IndexPermutation(n, 5, 1), IndexPermutation(n, 5, 2)):
        assert other(np.arange(n)).tolist() != base.tolist()


def test_positions_are_spread_evenly_over_seeds() -> None:
    # Where index 0 lands, over many seeds, should be uniform on range(n): a chi-square test at a
    # generous threshold (the 99.99th percentile for 9 degrees of freedom is about 33.7).
    n, seeds = 10, 4000
    landing = [
        int(np.flatnonzero(IndexPermutation(n, s)(np.arange(n)) == 0)[0]) for s in range(seeds)
    ]
    observed = np.bincount(landing, minlength=n)
    expected = seeds / n
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < 33.7, observed


def test_neighbours_are_not_kept_together() -> None:
    # A shuffle that kept consecutive windows consecutive would defeat its purpose.
    values = IndexPermutation(100_000, 9)(np.arange(100_000))
    adjacent = np.count_nonzero(np.abs(np.diff(values)) == 1)
    assert adjacent < 50  # a uniform permutation has about 2 such pairs


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="n >= 1"):
        IndexPermutation(0, 1)
    with pytest.raises(IndexError):
        IndexPermutation(10, 1)(np.array([10]))
    with pytest.raises(IndexError):
        IndexPermutation(10, 1)(np.array([-1]))
