"""data_io.prepare.split: a per-document, seeded, order-free train/val decision."""

from __future__ import annotations

import numpy as np
import pytest

from data_io.errors import ConfigError
from data_io.prepare.dedup import hash_texts
from data_io.prepare.split import check_val_fraction, is_val


def test_fraction_is_respected_and_depends_on_the_seed():
    hashes = hash_texts([f"document {i}" for i in range(50_000)])
    first = is_val(hashes, 0, 0.1)
    assert 0.09 < first.mean() < 0.11
    assert 0.04 < is_val(hashes, 0, 0.05).mean() < 0.06
    other = is_val(hashes, 7, 0.1)
    assert not np.array_equal(first, other)
    assert np.array_equal(first, is_val(hashes, 0, 0.1))


def test_decision_is_per_document_not_per_position():
    texts = [f"document {i}" for i in range(1000)]
    hashes = hash_texts(texts)
    order = np.random.default_rng(0).permutation(len(texts))
    assert np.array_equal(is_val(hashes, 3, 0.3)[order], is_val(hashes[order], 3, 0.3))


def test_lower_fraction_val_is_a_subset():
    hashes = hash_texts([f"d{i}" for i in range(5000)])
    assert not (is_val(hashes, 1, 0.05) & ~is_val(hashes, 1, 0.2)).any()
    assert not is_val(hashes, 1, 0.0).any()


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2, "0.1", None, True])
def test_bad_fraction(bad):
    with pytest.raises(ConfigError, match=r"val_fraction must be a number in \[0, 1\)"):
        check_val_fraction(bad)
