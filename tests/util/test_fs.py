"""publish_mode: temporary outputs end with the umask's permissions, not tempfile's 0700/0600;
a full disk's error names the file being written, and leaves no temporary file behind."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from data_io.errors import os_error_message
from data_io.util.fs import naming, publish_mode, try_flock, write_json_atomic, write_to

FULL = Path("/dev/full")  # every write fails with ENOSPC, as on a full disk


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_folder_and_file_modes_follow_the_umask(tmp_path: Path, mask: int) -> None:
    old = os.umask(mask)
    try:
        folder = Path(tempfile.mkdtemp(dir=tmp_path))
        fd, name = tempfile.mkstemp(dir=tmp_path)
        os.close(fd)
        publish_mode(folder)
        publish_mode(name)
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE(Path(name).stat().st_mode) == 0o666 & ~mask


def test_bin_plan_cache_is_readable_by_others(tmp_path: Path) -> None:
    from data_io.load import RowSource, TokenizedRowsDataset
    from tests.load.rows_fixture import random_rows, write_rows

    old = os.umask(0o022)
    try:
        rows = write_rows(tmp_path / "a.jsonl", random_rows(1, 10))
        TokenizedRowsDataset(
            [RowSource(path=str(rows))],
            sample_packing_method="sequential",
            sample_packing_sequence_len=64,
            dataset_prepared_path=str(tmp_path / "prepared"),
        )
    finally:
        os.umask(old)
    (plan,) = (tmp_path / "prepared").iterdir()
    assert stat.S_IMODE(plan.stat().st_mode) == 0o755


@pytest.mark.skipif(not FULL.exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_names_the_file_written(tmp_path: Path) -> None:
    with open(FULL, "wb", buffering=0) as full:
        with pytest.raises(OSError) as bare:
            full.write(b"x")  # what Python raises: no file name
        assert bare.value.filename is None
        with pytest.raises(OSError) as info, naming(tmp_path / "shard.tmp"):
            full.write(b"x")
        assert info.value.errno == errno.ENOSPC
        assert os_error_message(info.value).startswith(f"{tmp_path / 'shard.tmp'}: No space left")
        with pytest.raises(OSError) as info:
            write_to(full, b"x")  # names the open file itself
        assert info.value.filename == str(FULL)
    with pytest.raises(FileNotFoundError) as info, naming(tmp_path / "other"):
        (tmp_path / "missing").read_bytes()  # an error that names its file keeps its name
    assert info.value.filename == str(tmp_path / "missing")


def test_write_json_atomic_leaves_no_temporary_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(*_: object, **__: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(json, "dump", full_disk)
    with pytest.raises(OSError) as info:
        write_json_atomic(tmp_path / "meta.json", {"a": 1})
    assert info.value.filename == str(tmp_path / f".meta.json.{os.getpid()}.tmp")
    assert list(tmp_path.iterdir()) == []


def test_try_flock_holds_refuses_a_conflict_and_runs_unguarded_without_flock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = os.open(tmp_path, os.O_RDONLY), os.open(tmp_path, os.O_RDONLY)
    try:
        assert try_flock(first)  # held
        assert not try_flock(second)  # another open file: conflicts
        assert not try_flock(second, shared=True)
        os.close(first)  # closing releases it
        first = os.open(tmp_path, os.O_RDONLY)
        assert try_flock(first, shared=True) and try_flock(second, shared=True)  # shared: both
        third = os.open(tmp_path, os.O_RDONLY)
        assert not try_flock(third)  # an exclusive one waits for both
        os.close(third)

        def no_flock(fd: int, operation: int) -> None:
            raise OSError(errno.ENOLCK, "No locks available")

        monkeypatch.setattr(fcntl, "flock", no_flock)
        assert try_flock(first)  # no flock on this file system: unguarded, not refused
    finally:
        os.close(first)
        os.close(second)
