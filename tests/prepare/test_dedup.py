"""data_io.prepare.dedup: bounded-memory exact de-duplication against an in-memory oracle."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from data_io.errors import ConfigError
from data_io.prepare.dedup import HashDedup, hash_texts, parse_memory
from tests.prepare.helpers import documents


def oracle_keep(texts: list[str], seen: set[str] | None = None) -> list[bool]:
    seen = set() if seen is None else set(seen)
    keep = []
    for text in texts:
        keep.append(text not in seen)
        seen.add(text)
    return keep


def run_dedup(tmp_path: Path, texts: list[str], budget: int, batch: int = 97, prior=None):
    dedup = HashDedup(tmp_path, budget)
    for start in range(0, len(texts), batch):
        dedup.add(hash_texts(texts[start : start + batch]), start)
    keep, duplicates = dedup.keep_mask(len(texts), prior, tmp_path / "kept.u64")
    return dedup, np.asarray(keep).tolist(), duplicates


@pytest.mark.parametrize("budget", [4096, 10_000, 1 << 30])
def test_same_result_as_an_in_memory_set(tmp_path: Path, budget: int):
    texts = documents(6000, seed=1, duplicates=2500)
    dedup, keep, duplicates = run_dedup(tmp_path, texts, budget)
    expected = oracle_keep(texts)
    assert keep == expected
    assert duplicates == expected.count(False) == 2500
    assert dedup.peak_bytes <= budget
    if budget < 10_000:
        # 8,500 records of 24 bytes are 50 times the budget: it must have spilled many runs
        assert dedup.spilled > 10
    kept = np.fromfile(tmp_path / "kept.u64", dtype=np.uint64).reshape(-1, 2)
    assert len(kept) == 6000
    assert np.all(np.diff(kept[:, 0].astype(np.float64)) >= 0)  # sorted by the high word


def test_many_copies_of_one_document_across_runs(tmp_path: Path):
    texts = ["same text"] * 3000 + ["other"] + ["same text"] * 10
    _, keep, duplicates = run_dedup(tmp_path, texts, 4096, batch=13)
    assert keep == oracle_keep(texts)
    assert duplicates == 3009


def test_prior_hashes_win_over_this_run(tmp_path: Path):
    old = documents(500, seed=2)
    first = tmp_path / "first"
    first.mkdir()
    run_dedup(first, old, 4096)
    new = documents(300, seed=3) + old[:50] + documents(300, seed=3)[:20]
    second = tmp_path / "second"
    second.mkdir()
    _, keep, duplicates = run_dedup(second, new, 4096, prior=first / "kept.u64")
    assert keep == oracle_keep(new, seen=set(old))
    assert duplicates == 70
    kept = np.fromfile(second / "kept.u64", dtype=np.uint64)
    assert len(kept) == 2 * (500 + 300)


def test_run_files_are_removed_after_the_merge(tmp_path: Path):
    run_dedup(tmp_path, documents(2000, seed=4), 4096)
    assert not list(tmp_path.glob("dedup_run_*"))


def test_hash_is_128_bits_of_the_utf8_text():
    hashes = hash_texts(["a", "a", "b", "é"])
    assert hashes.shape == (4, 2) and hashes.dtype == np.uint64
    assert (hashes[0] == hashes[1]).all() and not (hashes[0] == hashes[2]).all()


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1GB", 1 << 30),
        ("512MB", 512 << 20),
        ("64 KiB", 64 << 10),
        ("2.5GB", int(2.5 * 2**30)),
        (8192, 8192),
        ("10000", 10000),
    ],
)
def test_parse_memory(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("bad", ["", "lots", "1XB", "-1GB", "10", 100, True, "1 G B"])
def test_parse_memory_rejects(bad):
    with pytest.raises(ConfigError, match="is not a size of at least 4096 bytes"):
        parse_memory(bad)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(max_size=200), max_size=50))
def test_hashes_are_hashlibs_blake2b_with_16_bytes(texts: list[str]) -> None:
    """The Rust hash against the oracle: hashlib's BLAKE2b with a 16-byte digest, as the hashes
    kept by earlier runs were made (any text, surrogates aside: they have no UTF-8)."""
    import hashlib

    texts = [t for t in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    digests = b"".join(hashlib.blake2b(t.encode(), digest_size=16).digest() for t in texts)
    expected = np.frombuffer(digests, dtype=">u8").astype(np.uint64).reshape(-1, 2)
    got = hash_texts(texts)
    assert got.dtype == np.uint64 and got.shape == (len(texts), 2)
    assert np.array_equal(got, expected)


def test_hashing_a_text_that_is_not_a_str_names_it() -> None:
    texts = [f"document {i}" for i in range(40)]
    with pytest.raises(TypeError, match=r"text 33 of the batch has type bytes, not str"):
        hash_texts([*texts[:33], b"raw", *texts[33:]])
    # Any sequence of str, not only a list.
    assert np.array_equal(hash_texts(tuple(texts)), hash_texts(texts))
