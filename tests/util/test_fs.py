"""publish_mode: temporary outputs end with the umask's permissions, not tempfile's 0700/0600."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from data_io.util.fs import publish_mode


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
