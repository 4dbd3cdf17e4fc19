"""Where the encoder keeps its piece tables: each process its own, or one file for the node
(``TextEncoder(tables=...)``), in DataLoader workers started by fork and by spawn."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from torch.utils.data import DataLoader, Dataset

from data_io import _core
from data_io.errors import ConfigError
from data_io.tokenizer.encoder import TextEncoder
from tests.conftest import mounted_tmpfs
from tests.tokenizer.test_encoder import TEXTS, expected_ids

PREFIX = f"data_io-pieces-{os.getuid()}-"


def node_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(PREFIX))


@pytest.fixture()
def node_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of its own for the node's files (children inherit the variable)."""
    folder = tmp_path / "shm"
    folder.mkdir()
    monkeypatch.setenv("DATA_IO_NODE_TABLES_DIR", str(folder))
    return folder


class _EncodeInWorker(Dataset):
    """Each item: the worker's ids for TEXTS, where its tables are, and its pid."""

    def __init__(self, encoder: TextEncoder) -> None:
        self.encoder = encoder

    def __len__(self) -> int:
        return 6

    def __getitem__(self, index: int) -> dict[str, Any]:
        ids = self.encoder.encode_batch(TEXTS, 0).ids.tolist()
        folder = Path(os.environ["DATA_IO_NODE_TABLES_DIR"])
        return {
            "ids": ids,
            "tables": self.encoder.tables,
            "pid": os.getpid(),
            "files": node_files(folder),
        }


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_share_one_node_file(
    method: str, small_tokenizer: Path, node_dir: Path
) -> None:
    encoder = TextEncoder(small_tokenizer)  # "auto": the parent keeps its own tables
    assert encoder.tables == "process"
    expected = encoder.encode_batch(TEXTS, 0).ids.tolist()
    loader = DataLoader(
        _EncodeInWorker(encoder),
        batch_size=None,
        num_workers=2,
        multiprocessing_context=method,
    )
    items = list(loader)
    assert len({item["pid"] for item in items}) == 2
    places = {item["tables"] for item in items}
    assert len(places) == 1, places
    place = places.pop()
    assert place.startswith(f"node ({node_dir}/{PREFIX}"), place
    # A worker may see the other's temporary file while it is being made, never two tables.
    made = [[name for name in item["files"] if not name.endswith(".tmp")] for item in items]
    assert all(len(names) == 1 for names in made), made
    assert all(item["ids"] == expected for item in items)
    assert node_files(node_dir) == [], "the last worker to leave removed the file"


def test_node_tables_give_the_oracles_ids(small_tokenizer: Path, node_dir: Path) -> None:
    oracle = [[*ids, 0] for ids in expected_ids(small_tokenizer, TEXTS * 3)]
    encoder = TextEncoder(small_tokenizer, tables="node")
    assert (encoder.tables or "").startswith("node (")
    batch = encoder.encode_batch(TEXTS * 3, 0)
    got = [
        batch.ids[start:end].tolist()
        for start, end in zip(batch.offsets[:-1], batch.offsets[1:], strict=True)
    ]
    assert got == oracle
    assert len(node_files(node_dir)) == 1


def _child_encodes(path: Path, queue: Any) -> None:
    encoder = TextEncoder(path, tables="node")
    queue.put((encoder.tables, encoder.encode_batch(TEXTS, 0).ids.tolist()))


def test_a_process_ending_normally_removes_the_file(small_tokenizer: Path, node_dir: Path) -> None:
    """A plain child (multiprocessing, then a separate interpreter) and no DataLoader."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_child_encodes, args=(small_tokenizer, queue))
    child.start()
    place, ids = queue.get(timeout=120)  # a guard against a hang, not a timing assertion
    child.join(timeout=60)
    assert place.startswith("node (")
    assert ids == TextEncoder(small_tokenizer, tables="process").encode_batch(TEXTS, 0).ids.tolist()
    assert node_files(node_dir) == []
    script = (
        "import sys; from data_io.tokenizer.encoder import TextEncoder; "
        "e = TextEncoder(sys.argv[1], tables='node'); e.encode_batch(['x']); print(e.tables)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(small_tokenizer)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.startswith("node (")
    assert node_files(node_dir) == []


def test_a_file_left_by_a_killed_process_is_removed_by_the_next(
    small_tokenizer: Path, node_dir: Path
) -> None:
    script = (
        "import os, sys; from data_io.tokenizer.encoder import TextEncoder; "
        "TextEncoder(sys.argv[1], tables='node').encode_batch(['x']); os.kill(os.getpid(), 9)"
    )
    subprocess.run([sys.executable, "-c", script, str(small_tokenizer)], check=False)
    left = node_files(node_dir)
    assert len(left) == 1, "a killed process leaves its file"
    stale = node_dir / (PREFIX + "0123456789abcdef0123456789abcdef")
    (node_dir / left[0]).rename(stale)  # as if it were another tokenizer's
    encoder = TextEncoder(small_tokenizer, tables="node")
    assert not stale.exists(), "no process holds it: removed when the next file is made"
    assert len(node_files(node_dir)) == 1
    assert encoder.encode_batch(["x"]).ids.size > 0


def test_no_room_or_no_folder_keeps_tables_in_the_process(
    small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATA_IO_NODE_TABLES_DIR", str(tmp_path / "missing"))
    encoder = TextEncoder(small_tokenizer, tables="node")
    place = encoder.tables or ""
    assert place.startswith("process (node tables unavailable: cannot make"), place
    assert str(tmp_path / "missing") in place
    expected = TextEncoder(small_tokenizer, tables="process").encode_batch(TEXTS, 0).ids
    assert encoder.encode_batch(TEXTS, 0).ids.tolist() == expected.tolist()


def test_a_full_tmpfs_is_a_reason_not_a_crash(
    small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with mounted_tmpfs(tmp_path / "small", "1m") as small:
        monkeypatch.setenv("DATA_IO_NODE_TABLES_DIR", str(small))
        encoder = TextEncoder(small_tokenizer, tables="node")
        place = encoder.tables or ""
        assert "has no room for the" in place and "DATA_IO_NODE_TABLES_DIR" in place, place
        assert list(small.iterdir()) == [], "nothing half-made is left"
        assert encoder.encode_batch(["hello"]).ids.size > 0


def test_bad_choices_are_config_errors(small_tokenizer: Path) -> None:
    with pytest.raises(ConfigError, match="'process', 'node'"):
        TextEncoder(small_tokenizer, tables="shared")
    with pytest.raises(ConfigError, match=r"use \"process\""):
        _core.Encoder(str(small_tokenizer), "everywhere")


def test_the_choice_travels_with_the_pickle(small_tokenizer: Path, node_dir: Path) -> None:
    import pickle

    copy = pickle.loads(pickle.dumps(TextEncoder(small_tokenizer, tables="node")))
    assert (copy.tables or "").startswith("node (")


def _child_loads_and_exits(path: Path, queue: Any) -> None:
    queue.put(TextEncoder(path, tables="node").tables)


def test_a_forked_child_leaving_keeps_its_parents_file(
    small_tokenizer: Path, node_dir: Path
) -> None:
    """The child inherits the parent's open file and lock; at its exit it must let go of its
    own files only, or the parent's lock goes with it and the file is removed under it."""
    parent = TextEncoder(small_tokenizer, tables="node")
    assert (parent.tables or "").startswith("node (")
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_loads_and_exits, args=(small_tokenizer, queue))
    child.start()
    place = queue.get(timeout=120)  # a guard against a hang, not a timing assertion
    child.join(timeout=60)
    assert child.exitcode == 0
    assert place == parent.tables
    assert len(node_files(node_dir)) == 1, "the parent still holds its file"
