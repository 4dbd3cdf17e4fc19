"""data_io.prepare.shards: exact shard sizes, formats, temporary names, continuing a tail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from data_io.errors import OutputError
from data_io.prepare.shards import ShardWriter, npy_header, truncate_shard


def write(folder: Path, chunks: list[np.ndarray], fmt="bin", dtype=np.uint16, existing=()):
    writer = ShardWriter(folder, 10, np.dtype(dtype), fmt, list(existing))
    for chunk in chunks:
        writer.add(chunk)
    records = writer.finish()
    return writer, records


@pytest.mark.parametrize("fmt", ["bin", "npy"])
def test_exact_sizes_and_only_the_last_shorter(tmp_path: Path, fmt: str):
    stream = np.arange(37, dtype=np.uint32)
    writer, records = write(tmp_path, [stream[:3], stream[3:25], stream[25:]], fmt)
    assert [r.tokens for r in records] == [10, 10, 10, 7]
    assert not list(tmp_path.glob(f"*.{fmt}"))  # nothing final before commit
    assert len(list(tmp_path.glob(".shard_*.tmp"))) == 4
    writer.commit()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"shard_0000{i}.{fmt}" for i in range(4)]
    if fmt == "npy":
        back = np.concatenate([np.load(tmp_path / n) for n in names])
        assert np.load(tmp_path / names[0]).dtype == np.uint16
    else:
        back = np.concatenate([np.fromfile(tmp_path / n, dtype=np.uint16) for n in names])
    assert back.tolist() == stream.tolist()


@pytest.mark.parametrize("fmt", ["bin", "npy"])
def test_a_later_run_continues_the_short_last_shard(tmp_path: Path, fmt: str):
    first, records = write(tmp_path, [np.arange(13, dtype=np.uint32)], fmt)
    first.commit()
    full_before = (tmp_path / f"shard_00000.{fmt}").read_bytes()
    second, records = write(tmp_path, [np.arange(100, 112, dtype=np.uint32)], fmt, existing=records)
    second.commit()
    assert [r.tokens for r in records] == [10, 10, 5]
    assert (tmp_path / f"shard_00000.{fmt}").read_bytes() == full_before
    assert [s.final.name for s in second.written] == [f"shard_00001.{fmt}", f"shard_00002.{fmt}"]
    if fmt == "npy":
        assert np.load(tmp_path / "shard_00001.npy").tolist() == [10, 11, 12, *range(100, 107)]


def test_a_changed_tail_shard_is_refused(tmp_path: Path):
    first, records = write(tmp_path, [np.arange(13, dtype=np.uint32)])
    first.commit()
    (tmp_path / "shard_00001.bin").write_bytes(b"\x00\x00" * 3)
    with pytest.raises(OutputError, match=r"shard_00001\.bin: the shard differs"):
        write(tmp_path, [np.arange(5, dtype=np.uint32)], existing=records)
    assert not list(tmp_path.glob("*.tmp"))


def test_abandon_removes_temporary_files(tmp_path: Path):
    writer = ShardWriter(tmp_path, 10, np.dtype(np.uint16), "bin", [])
    writer.add(np.arange(25, dtype=np.uint32))
    writer.abandon()
    assert list(tmp_path.iterdir()) == []


def test_truncate_restores_a_prefix(tmp_path: Path):
    path = tmp_path / "s.npy"
    np.save(path, np.arange(20, dtype=np.uint32))
    assert len(npy_header(np.dtype(np.uint32), 20)) == 128
    truncate_shard(path, 7, np.dtype(np.uint32), "npy")
    assert np.load(path).tolist() == list(range(7))


@pytest.mark.parametrize("fmt", ["npy", "bin"])
def test_truncate_never_pads_a_shorter_shard(tmp_path: Path, fmt: str):
    path = tmp_path / f"s.{fmt}"
    data = np.arange(5, dtype=np.uint16)
    if fmt == "npy":
        np.save(path, data)
    else:
        data.tofile(path)
    before = path.read_bytes()
    with pytest.raises(OutputError, match=r"never padded"):
        truncate_shard(path, 9, np.dtype(np.uint16), fmt)
    assert path.read_bytes() == before


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_writer_stopped_by_a_full_disk_names_the_shard_and_abandons_cleanly(
    tmp_path: Path,
) -> None:
    writer = ShardWriter(tmp_path, 1 << 20, np.dtype(np.uint16), "bin", [])
    writer.add(np.arange(5, dtype=np.uint32))
    assert writer._open is not None
    temporary = writer._open.temporary
    writer._open.file.close()
    writer._open.file = open("/dev/full", "wb")  # noqa: SIM115  every write: ENOSPC
    with pytest.raises(OSError) as info:
        for _ in range(10_000):  # small writes: buffered, then a flush that fails
            writer.add(np.arange(5, dtype=np.uint32))
    assert info.value.filename == str(temporary)
    writer.abandon()  # its close flushes again and fails again: the file still goes
    assert not temporary.exists()
