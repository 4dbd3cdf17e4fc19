"""EvalLoader: fixed batches in file order, strided over ranks, wrapping around a short set."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from data_io.errors import ConfigError
from data_io.load import (
    EvalLoader,
    MemoryMappedDataset,
    build_eval_loader,
    build_eval_loaders,
    load_config,
)
from tests.load.id_shards import sample_ids, write_id_source


@pytest.fixture()
def dataset(tmp_path: Path) -> MemoryMappedDataset:
    return MemoryMappedDataset(write_id_source(tmp_path / "val", 0, [9 * 7, 9 * 4]), 9)


def test_same_batches_every_evaluation_and_wrap_around(dataset: MemoryMappedDataset) -> None:
    loaders = [EvalLoader(dataset, steps=4, batch_size=2, rank=r, world_size=2) for r in range(2)]
    runs = [[sample_ids(b) for b in loader] for loader in loaders]
    again = [[sample_ids(b) for b in loader] for loader in loaders]
    assert runs == again
    windows = [dataset.window(i)[0] for i in range(len(dataset))]  # 11 windows, in file order
    expected = [windows[k % 11] for k in range(16)]  # 4 steps of 4 samples wrap past 11
    merged = [runs[k % 2][(k // 2) // 2][(k // 2) % 2] for k in range(16)]
    assert merged == expected
    assert len(loaders[0]) == 4


def test_should_evaluate(dataset: MemoryMappedDataset) -> None:
    loader = EvalLoader(dataset, steps=1, batch_size=1, interval=10)
    assert [s for s in range(35) if loader.should_evaluate(s)] == [10, 20, 30]


def test_disabled_and_from_config(dataset: MemoryMappedDataset, tmp_path: Path) -> None:
    assert build_eval_loader(load_config(), 0, 1) is None
    config = load_config(
        None,
        [
            "eval.enabled=true",
            f"eval.dataset_path={tmp_path / 'val'}",
            "eval.steps=2",
            "train.seq_len=8",
            "train.batch_size=3",
        ],
    )
    loader = build_eval_loader(config, 0, 1)
    assert loader is not None
    batches = list(loader)
    assert len(batches) == 2 and batches[0]["input_ids"].shape == (3, 8)
    config.eval.dataset_path = str(tmp_path / "missing")
    from data_io.errors import InputError

    with pytest.raises(InputError, match="does not exist"):
        build_eval_loader(config, 0, 1)
    with pytest.raises(ConfigError, match=r"eval.enabled needs"):
        load_config(None, ["eval.enabled=true"])


def test_named_eval_sets_beside_the_main_one(tmp_path: Path) -> None:
    # MyPT's dual eval: the domain's val set and a general one, each its own loader.
    write_id_source(tmp_path / "domain_val", 1, [9 * 3])
    write_id_source(tmp_path / "general_val", 2, [9 * 5])
    job = tmp_path / "job.toml"
    job.write_text(
        f"""
[eval]
enabled = true
steps = 2
dataset_path = "{tmp_path / "domain_val"}"

[eval.sets.general]
dataset_path = "{tmp_path / "general_val"}"

[train]
seq_len = 8
batch_size = 2
"""
    )
    loaders = build_eval_loaders(job, 0, 1)
    assert list(loaders) == ["val", "general"]
    sources = {
        name: {i // 10**7 for b in ld for i in sample_ids(b)} for name, ld in loaders.items()
    }
    assert sources == {"val": {1}, "general": {2}}
    assert len(loaders["general"].dataset) == 5
    main = build_eval_loader(job, 0, 1)
    assert main is not None and len(main.dataset) == 3


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["eval.sets.val.dataset_path=x"], "is \\[eval\\]'s own source"),
        (["eval.sets.general.file_pattern=*.bin"], "needs one of dataset_path or hf_dataset_name"),
        (
            ["eval.sets.general.dataset_path=x", "eval.sets.general.hf_dataset_name=y"],
            "needs one of dataset_path or hf_dataset_name",
        ),
    ],
)
def test_named_eval_set_mistakes_are_named(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, ["eval.enabled=true", *overrides])


def test_only_named_sets_is_enough_and_the_main_loader_is_then_none(tmp_path: Path) -> None:
    write_id_source(tmp_path / "general_val", 2, [9 * 5])
    config = load_config(
        None,
        [
            "eval.enabled=true",
            f"eval.sets.general.dataset_path={tmp_path / 'general_val'}",
            "train.seq_len=8",
        ],
    )
    assert build_eval_loader(config, 0, 1) is None
    assert list(build_eval_loaders(config, 0, 1)) == ["general"]


def test_an_eval_set_declares_its_own_bin_dtype(tmp_path: Path) -> None:
    # A general corpus stored as uint32 beside uint16 training shards (data.dtype).
    (tmp_path / "general").mkdir()
    tokens = np.arange(9 * 4, dtype=np.uint32) + 70_000
    tokens.tofile(tmp_path / "general" / "shard_00000.bin")
    base = [
        "eval.enabled=true",
        f"eval.sets.general.dataset_path={tmp_path / 'general'}",
        "eval.sets.general.file_pattern=*.bin",
        "data.dtype=uint16",
        "train.seq_len=8",
    ]
    loader = build_eval_loaders(load_config(None, [*base, "eval.sets.general.dtype=uint32"]))
    assert loader["general"].dataset.window(1).tolist() == tokens[9:18].tolist()
    with pytest.raises(ConfigError, match=r"eval\.sets\.general\.dtype"):
        load_config(None, [*base, "eval.sets.general.dtype=float32"])


def test_an_eval_folder_of_other_shards_names_the_eval_key_to_set(tmp_path: Path) -> None:
    # data.file_pattern is *.bin; the eval set's own pattern keeps its *.npy default.
    from data_io.errors import InputError

    (tmp_path / "val").mkdir()
    (np.arange(9 * 4, dtype=np.uint16)).tofile(tmp_path / "val" / "shard_00000.bin")
    base = ["eval.enabled=true", "data.file_pattern=*.bin", "train.seq_len=8"]
    with pytest.raises(InputError, match=r"holds \.bin shards: pass eval\.file_pattern='\*\.bin'"):
        build_eval_loader(load_config(None, [*base, f"eval.dataset_path={tmp_path / 'val'}"]))
    general = f"eval.sets.general.dataset_path={tmp_path / 'val'}"
    with pytest.raises(InputError, match=r"pass eval\.sets\.general\.file_pattern='\*\.bin'"):
        build_eval_loaders(load_config(None, [*base, general]))
