"""The Rust Philox shuffles against numpy itself: same values, same generator state after."""

from __future__ import annotations

import numpy as np
import pytest

from data_io.sampling.rng import PhiloxShuffler


def _same_state(ours: dict, numpy_state: dict) -> None:
    for key in ("counter", "key"):
        np.testing.assert_array_equal(ours["state"][key], numpy_state["state"][key])
    np.testing.assert_array_equal(ours["buffer"], numpy_state["buffer"])
    for key in ("buffer_pos", "has_uint32", "uinteger"):
        assert ours[key] == numpy_state[key], key


# Seeds past 2**64 and 2**128 too: the original passes its `seed: int` to Philox(seed), which
# hashes any non-negative int through SeedSequence (2**128 bounds Philox's `key`, not `seed`),
# so the sampler accepts them as well, and must draw what numpy draws.
@pytest.mark.parametrize("seed", [0, 1, 42, 2**63 + 5, 2**64, 2**128 + 3, 2**300 - 1])
def test_shuffle_and_permutation_match_numpy_call_for_call(seed: int) -> None:
    numpy_rng = np.random.Generator(np.random.Philox(seed))
    ours = PhiloxShuffler(seed)
    sizes = np.random.default_rng(seed % 1000).integers(0, 5000, 40).tolist()
    # Lengths around the look-ahead batch (32) and word boundaries, then random ones.
    for n in [0, 1, 2, 3, 31, 32, 33, 64, 65, 1000, 2**16 + 1, *sizes]:
        expected = np.arange(n, dtype=np.int64) * 7 - 3
        got = expected.copy()
        numpy_rng.shuffle(expected)
        ours.shuffle(got)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(ours.permutation(n), numpy_rng.permutation(n))
        _same_state(ours.state, numpy_rng.bit_generator.state)


def test_state_round_trips_through_numpy() -> None:
    """Mid-stream (an odd number of 32-bit draws used), hand the state to numpy and back."""
    ours = PhiloxShuffler(7)
    ours.shuffle(np.arange(3, dtype=np.int64))  # 2 draws of 32 bits: a spare half is left
    bit_generator = np.random.Philox()
    bit_generator.state = ours.state
    numpy_rng = np.random.Generator(bit_generator)
    np.testing.assert_array_equal(numpy_rng.permutation(500), ours.permutation(500))
    resumed = PhiloxShuffler(state=numpy_rng.bit_generator.state)
    np.testing.assert_array_equal(resumed.permutation(77), numpy_rng.permutation(77))


def test_shuffles_views_in_place_and_refuses_strided_arrays() -> None:
    numpy_rng = np.random.Generator(np.random.Philox(3))
    ours = PhiloxShuffler(3)
    expected, got = np.arange(100, dtype=np.int64), np.arange(100, dtype=np.int64)
    numpy_rng.shuffle(expected[10:60])
    ours.shuffle(got[10:60])
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="contiguous"):
        ours.shuffle(np.arange(10, dtype=np.int64)[::2])
    with pytest.raises(TypeError):
        ours.shuffle(np.arange(10, dtype=np.int32))
