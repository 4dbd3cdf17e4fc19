"""The token pool: dtype choice (the original's defect fixed) and the Rust copy (windows,
conversion, range checks, bad sources, write failures, cancellation)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError, OutputError
from data_io.sampling import pool
from data_io.sampling.pool import CopyJob, pool_dtype, write_pool
from data_io.sampling.tasks import read_token_header

U1, U2, U4, I4 = np.dtype("u1"), np.dtype("<u2"), np.dtype("<u4"), np.dtype("<i4")


@pytest.mark.parametrize(
    ("vocab_size", "sources", "expected"),
    [
        (256, [U4], U1),  # largest id 255
        (257, [U4], U2),
        (65_535, [U4], U2),
        (65_536, [U4], U2),  # the original used int32 here
        (65_537, [U4], I4),
        (151_936, [U2], I4),
        (None, [U2, U1], U2),
        (None, [U1], U1),
        (None, [U4], I4),
        (None, [], U1),
    ],
)
def test_pool_dtype_is_the_smallest_that_holds_every_id(vocab_size, sources, expected) -> None:
    assert pool_dtype(vocab_size, sources) == expected


def test_vocab_too_large_for_int32() -> None:
    with pytest.raises(InputError, match="does not fit"):
        pool_dtype(2**31 + 1, [U4])


def _token_file(tmp_path: Path, name: str, values: np.ndarray):
    path = tmp_path / f"{name}.npy"
    np.save(path, values)
    return read_token_header(path, name)


def _jobs(tmp_path: Path, arrays: list[np.ndarray]) -> tuple[list[CopyJob], int]:
    jobs, offset = [], 0
    for index, array in enumerate(arrays):
        jobs.append(CopyJob(f"t{index}", _token_file(tmp_path, f"t{index}", array), offset))
        offset += len(array)
    return jobs, offset


# The Rust copy works in windows of 256 Ki tokens: these sizes give several windows per
# task, partial last windows and an empty task.
SIZES = (300_001, 5, 0, 262_145)


@pytest.mark.parametrize("target", [U1, U2, I4])
@pytest.mark.parametrize("readers", [0, 1, 3])
def test_copy_converts_every_source_dtype(tmp_path: Path, target: np.dtype, readers: int) -> None:
    rng = np.random.default_rng(0)
    limit = min(int(np.iinfo(target).max), 2**20)
    source_dtypes = (U4, U2, U4, U1)
    arrays = [
        rng.integers(0, min(limit, int(np.iinfo(dtype).max)), size, endpoint=True).astype(dtype)
        for size, dtype in zip(SIZES, source_dtypes, strict=True)
    ]
    jobs, total = _jobs(tmp_path, arrays)
    seen: list[int] = []
    out = tmp_path / "pool.npy"
    write_pool(out, jobs, total, target, readers=readers, progress=seen.append)
    loaded = np.load(out)
    assert loaded.dtype == target
    expected = np.concatenate([array.astype(np.int64) for array in arrays])
    np.testing.assert_array_equal(loaded.astype(np.int64), expected)
    assert sum(seen) == total  # every token reported once


def test_same_dtype_copy(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, 65_535, size).astype(U2) for size in SIZES]
    jobs, total = _jobs(tmp_path, arrays)
    write_pool(tmp_path / "pool.npy", jobs, total, U2, readers=2)
    np.testing.assert_array_equal(np.load(tmp_path / "pool.npy"), np.concatenate(arrays))


def test_id_too_large_for_the_pool_is_refused(tmp_path: Path) -> None:
    values = np.array([1, 2, 70_000, 3], dtype=U4)
    job = CopyJob("big.jsonl", _token_file(tmp_path, "big", values), 0)
    with pytest.raises(InputError, match=r"big\.npy: task big\.jsonl: token 2 is 70000, above"):
        write_pool(tmp_path / "pool.npy", [job], 4, U2)


def test_id_too_large_in_a_later_window_names_its_position(tmp_path: Path) -> None:
    values = np.zeros(600_000, dtype=U4)
    values[555_555] = 300
    job = CopyJob("t", _token_file(tmp_path, "t", values), 0)
    with pytest.raises(InputError, match=r"token 555555 is 300, above the uint8 pool's maximum"):
        write_pool(tmp_path / "pool.npy", [job], len(values), U1, readers=2)


def test_source_shorter_than_its_header_is_refused(tmp_path: Path) -> None:
    token_file = _token_file(tmp_path, "t", np.arange(1000, dtype=U4))
    with token_file.path.open("r+b") as handle:  # truncated after the header was read
        handle.truncate(token_file.data_offset + 400)
    with pytest.raises(InputError, match="fewer than the 1000 tokens its header declares"):
        write_pool(tmp_path / "pool.npy", [CopyJob("t", token_file, 0)], 1000, U2)


@pytest.mark.parametrize("readers", [0, 1])
def test_write_failure_is_an_output_error(tmp_path: Path, readers: int) -> None:
    job = CopyJob("t", _token_file(tmp_path, "t", np.arange(10, dtype=U2)), 0)
    with pytest.raises(OutputError, match="cannot write the token pool /dev/full"):
        pool.copy_tokens(
            Path("/dev/full"), 0, U2, [job], readers=readers, progress=lambda _n: None,
            cancelled=threading.Event(),
        )  # fmt: skip


def test_cancelled_copy_stops_with_an_error(tmp_path: Path) -> None:
    job = CopyJob("t", _token_file(tmp_path, "t", np.arange(10, dtype=U2)), 0)
    cancelled = threading.Event()
    cancelled.set()
    with pytest.raises(OutputError, match="cancelled"):
        write_pool(tmp_path / "pool.npy", [job], 10, U2, cancelled=cancelled)


def test_header_is_a_valid_npy(tmp_path: Path) -> None:
    for dtype in (U1, U2, I4):
        header = pool.npy_header(dtype, 12345)
        assert len(header) % 64 == 0
        path = tmp_path / "h.npy"
        path.write_bytes(header + np.arange(12345).astype(dtype).tobytes())
        assert np.load(path, mmap_mode="r").shape == (12345,)


# An id at or above vocab_size fits the pool's dtype but is no word of the vocabulary (a task
# of another tokenizer): the copy refuses it, naming task, file and position; the read-only
# pre-check (used before deleting a previous output) says the same.
VOCAB_CASES = [
    # (source dtype, pool dtype, vocab_size, bad position, bad value)
    (U2, U2, 1000, 300_500, 1000),  # same dtype: checked without converting
    (U4, U2, 1000, 7, 65_000),  # converted
    (U1, U1, 200, 3, 255),  # uint8 pool with a vocabulary below 256
    (U4, I4, 70_000, 262_150, 70_001),  # a later window of an int32 pool
]


@pytest.mark.parametrize(("source", "target", "vocab", "at", "value"), VOCAB_CASES)
@pytest.mark.parametrize("readers", [0, 2])
def test_ids_at_or_above_vocab_size_are_refused(
    tmp_path: Path, source, target, vocab: int, at: int, value: int, readers: int
) -> None:
    values = (np.arange(300_600) % vocab).astype(source)
    values[at] = value
    good = CopyJob("good.jsonl", _token_file(tmp_path, "good", np.array([vocab - 1], source)), 0)
    bad = CopyJob("bad.jsonl", _token_file(tmp_path, "bad", values), 1)
    expected = (
        rf"bad\.npy: task bad\.jsonl: token {at} is {value}, not below vocab_size {vocab} of "
        r"tokenizer_info\.json: either this task's tokens\.npy is damaged or the task was "
        r"tokenized with another tokenizer"
    )
    with pytest.raises(InputError, match=expected):
        write_pool(
            tmp_path / "pool.npy", [good, bad], 1 + len(values), target, readers=readers,
            vocab_size=vocab,
        )  # fmt: skip
    with pytest.raises(InputError, match=expected):
        pool.check_token_ids([good, bad], target, vocab, chunk=100_000)


@pytest.mark.parametrize("vocab", [1000, 65_536, None])
def test_largest_id_of_the_vocabulary_is_accepted(tmp_path: Path, vocab: int | None) -> None:
    largest = 65_535 if vocab is None else vocab - 1
    values = np.array([0, largest, 5, largest], dtype=U4)
    job = CopyJob("t", _token_file(tmp_path, "t", values), 0)
    write_pool(tmp_path / "pool.npy", [job], 4, U2, vocab_size=vocab)
    np.testing.assert_array_equal(np.load(tmp_path / "pool.npy"), values)
    pool.check_token_ids([job], U2, vocab)  # nothing to report


def test_id_limit() -> None:
    assert pool.id_limit(U2, None) == 65_535
    assert pool.id_limit(U2, 65_536) == 65_535
    assert pool.id_limit(U2, 1000) == 999
    assert pool.id_limit(U1, 300) == 255  # the dtype is the tighter bound
