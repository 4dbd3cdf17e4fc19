"""The token pool: dtype choice (the original's defect fixed) and the chunked copy."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError
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


@pytest.mark.parametrize("target", [U1, U2, I4])
def test_copy_converts_in_bounded_chunks(tmp_path: Path, monkeypatch, target: np.dtype) -> None:
    monkeypatch.setattr(pool, "CHUNK_ELEMENTS", 7)  # many chunks, a partial last one
    monkeypatch.setattr(pool, "PIECE_ELEMENTS", 10)  # tasks split across workers
    rng = np.random.default_rng(0)
    limit = min(int(np.iinfo(target).max), 2**20)
    arrays = [
        rng.integers(0, limit, 23).astype(U4),
        rng.integers(0, min(limit, 65_535), 5).astype(U2),
        np.zeros(0, dtype=U4),
        rng.integers(0, min(limit, 255), 16).astype(U1),
    ]
    jobs, offset = [], 0
    for index, array in enumerate(arrays):
        jobs.append(CopyJob(f"t{index}", _token_file(tmp_path, f"t{index}", array), offset))
        offset += len(array)
    seen = []
    for workers in (1, 2):
        out = tmp_path / f"pool{workers}.npy"
        write_pool(out, jobs, offset, target, workers=workers, progress=seen.append)
        loaded = np.load(out)
        assert loaded.dtype == target
        assert loaded.tolist() == np.concatenate([a.astype(np.int64) for a in arrays]).tolist()
    assert sum(seen) == 2 * offset


def test_same_dtype_copy_through_the_kernel_and_fallback(tmp_path: Path, monkeypatch) -> None:
    values = np.arange(1000, dtype=U2)
    job = CopyJob("t", _token_file(tmp_path, "t", values), 5)
    other = CopyJob("u", _token_file(tmp_path, "u", np.array([7, 8, 9, 10, 11], dtype=U2)), 0)
    write_pool(tmp_path / "a.npy", [other, job], 1005, U2)
    expected = [7, 8, 9, 10, 11, *range(1000)]
    assert np.load(tmp_path / "a.npy").tolist() == expected

    def unsupported(*_args):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(pool.os, "copy_file_range", unsupported)
    write_pool(tmp_path / "b.npy", [other, job], 1005, U2)
    assert np.load(tmp_path / "b.npy").tolist() == expected


def test_same_dtype_copy_by_splice_then_read_write(tmp_path: Path, monkeypatch) -> None:
    """Disk -> tmpfs has no copy_file_range (EXDEV): splice, in many pipe-sized steps and
    pieces; where splice is refused too (even half-way through a step), read + write."""

    def unsupported(*_args, **_kwargs):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(pool.os, "copy_file_range", unsupported)
    monkeypatch.setattr(pool, "SPLICE_BYTES", 4096 + 6)  # not a multiple of a page
    monkeypatch.setattr(pool, "PIECE_ELEMENTS", 50_000)
    rng = np.random.default_rng(1)
    arrays = [rng.integers(0, 65_535, size).astype(U2) for size in (3, 123_457, 0, 77_777)]
    jobs, offset = [], 0
    for index, array in enumerate(arrays):
        jobs.append(CopyJob(f"t{index}", _token_file(tmp_path, f"t{index}", array), offset))
        offset += len(array)
    expected = np.concatenate(arrays).tolist()
    write_pool(tmp_path / "spliced.npy", jobs, offset, U2, workers=2)
    assert np.load(tmp_path / "spliced.npy").tolist() == expected

    real_splice, calls = pool.os.splice, {"n": 0}

    def splice_refused_later(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] > 5 and "offset_dst" in kwargs:  # after data entered the pipe
            raise OSError(22, "Invalid argument")
        return real_splice(*args, **kwargs)

    monkeypatch.setattr(pool.os, "splice", splice_refused_later)
    write_pool(tmp_path / "fallback.npy", jobs, offset, U2)
    assert np.load(tmp_path / "fallback.npy").tolist() == expected
    assert calls["n"] > 5


def test_id_too_large_for_the_pool_is_refused(tmp_path: Path) -> None:
    values = np.array([1, 2, 70_000, 3], dtype=U4)
    job = CopyJob("big.jsonl", _token_file(tmp_path, "big", values), 0)
    with pytest.raises(InputError, match=r"task big\.jsonl: .* token 2 is 70000"):
        write_pool(tmp_path / "pool.npy", [job], 4, U2)


def test_header_is_a_valid_npy(tmp_path: Path) -> None:
    for dtype in (U1, U2, I4):
        header = pool.npy_header(dtype, 12345)
        assert len(header) % 64 == 0
        path = tmp_path / "h.npy"
        path.write_bytes(header + np.arange(12345).astype(dtype).tobytes())
        assert np.load(path, mmap_mode="r").shape == (12345,)
