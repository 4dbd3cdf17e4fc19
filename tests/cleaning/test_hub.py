"""data_io.cleaning.hub: the failed-file log and damage diagnosis."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from data_io.cleaning.hub import (
    closed_files,
    damage_of,
    failed_file_log,
    local_path,
    wait_for_abandoned_reads,
)


def _parquet(path: Path) -> bytes:
    pq.write_table(pa.table({"a": ["x" * 100] * 10}), path)
    return path.read_bytes()


def test_damage_of_names_what_is_wrong(tmp_path: Path) -> None:
    good = _parquet(tmp_path / "good.parquet")
    cases = {
        "empty.parquet": b"",
        "lfs.parquet": b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 9\n",
        "html.parquet": b"<!DOCTYPE html><html>rate limited</html>",
        "cut.parquet": good[: len(good) // 2],
        "inside.parquet": good[:4] + b"\xff" * (len(good) - 8) + good[-4:],
        "rows.jsonl": b'{"a": 1}\n{"a": \n',
    }
    expected = {
        "empty.parquet": "it is empty",
        "lfs.parquet": "Git LFS pointer",
        "html.parquet": "not a Parquet file",
        "cut.parquet": "truncated: its Parquet footer is missing",
        "inside.parquet": "its Parquet data is damaged",
        "rows.jsonl": "not valid JSONL",
    }
    pq.write_table(pa.table({"a": pa.array([], pa.string())}), tmp_path / "no_rows.parquet")
    expected["no_rows.parquet"] = "an intact Parquet file of 0 rows, which `datasets` cannot"
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert expected[name] in damage_of(tmp_path / name), name
    assert expected["no_rows.parquet"] in damage_of(tmp_path / "no_rows.parquet")
    assert "0 rows" not in damage_of(tmp_path / "inside.parquet")
    assert "cannot be opened" in damage_of(tmp_path / "absent.parquet")


def test_local_path_of_logged_names() -> None:
    assert local_path("/data/copy/train.parquet") == Path("/data/copy/train.parquet")
    assert local_path("file:///data/x.json.gz") == Path("/data/x.json.gz")
    assert local_path("zip://a.json::/data/x.zip") == Path("/data/x.zip")
    assert local_path("gzip://a.json::hf://datasets/o/r/a.json.gz") is None
    assert local_path("hf://datasets/o/r@main/train.parquet") is None
    assert local_path("https://huggingface.co/x.parquet") is None


class _Collect(logging.Handler):
    """Stands for datasets' own stderr handler: what it would print."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_failed_file_log_catches_the_file_and_silences_only_that() -> None:
    parent = logging.getLogger("datasets")
    printed = _Collect()
    parent.addHandler(printed)
    logger = logging.getLogger("datasets.packaged_modules.parquet.parquet")
    try:
        with failed_file_log() as log:
            logger.warning("a warning about '/not/this' is left alone")
            logger.error("Failed to read file '/copy/train-0.parquet' with error ArrowInvalid: x")
            logger.error("Failed to read file '/copy/train-1.parquet' with error ArrowInvalid: x")
            logger.error("an error naming no file is left alone")
        assert log.file == "/copy/train-0.parquet"  # the first failure: the one raised
        assert printed.messages == [
            "a warning about '/not/this' is left alone",
            "an error naming no file is left alone",
        ]
        logger.error("Failed to read file '/copy/later.parquet'")  # outside: not filtered
        assert printed.messages[-1] == "Failed to read file '/copy/later.parquet'"
        assert parent.handlers[-1] is printed  # our handler was removed
        assert not printed.filters
    finally:
        parent.removeHandler(printed)


def test_failed_file_log_without_any_datasets_handler() -> None:
    parent = logging.getLogger("datasets")
    saved = parent.handlers[:]
    for handler in saved:
        parent.removeHandler(handler)
    try:
        with failed_file_log() as log:
            logging.getLogger("datasets.x").error("Failed to load JSON from file '/c/a.jsonl'")
        assert log.file == "/c/a.jsonl"
    finally:
        for handler in saved:
            parent.addHandler(handler)


def test_a_file_closed_before_the_scan_is_not_waited_for(tmp_path: Path) -> None:
    """A file closed in a frame that still runs (what ``spawn_main`` does with a worker's pipe
    from its parent) has no referrer ``gc`` sees and never goes: every scan on a ``clean
    --executor local`` worker waited the whole timeout (30 s) for it."""
    path = tmp_path / "pipe"
    path.write_bytes(b"x")
    with open(path, "rb") as from_parent:  # a local of this running frame, closed
        from_parent.read()
    before = closed_files()
    assert from_parent in before
    started = time.monotonic()
    wait_for_abandoned_reads(timeout=5.0, before=before)
    assert time.monotonic() - started < 2.0
    started = time.monotonic()
    wait_for_abandoned_reads(timeout=1.0)  # (the case itself: without ``before``, the timeout)
    assert time.monotonic() - started >= 1.0
