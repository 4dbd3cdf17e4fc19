"""xorl users drop in unchanged: the YAML snippets of seeds/xorl-dataset-loading.txt, each read
as written (paths pointed at small local data: no network, so a Hub id is served by a local copy
through the same load_dataset call), and checked against what the page says they produce."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.errors import ConfigError
from data_io.load import build_dataloader, load_config
from tests.load.rows_fixture import random_rows, write_rows


def run(tmp_path: Path, yaml_text: str, **replace: str) -> Any:
    """The loader of ``yaml_text`` with each seed path replaced by a local one."""
    for seed_path, local in replace.items():
        yaml_text = yaml_text.replace(seed_path, local)
    preamble = "train: {batch_size: 1, seed: 0}\n"
    path = tmp_path / "xorl.yaml"
    path.write_text(preamble + yaml_text)
    return build_dataloader(path, 0, 1, overrides=["data.num_workers=0"])


def all_heads(loader: Any) -> list[int]:
    return sorted(int(t) for b in loader for t in b["input_ids"].flatten() if t >= 10_000)


def heads_of(*rows: list[dict]) -> list[int]:
    return sorted(r["input_ids"][0] for group in rows for r in group)


def hub_copy(root: Path, split: str, rows: list[dict]) -> Path:
    """A local copy of a Hub dataset (what `hf download` writes), with a README naming a split."""
    write_rows(root / "data" / f"{split}.jsonl", rows)
    (root / "README.md").write_text(
        f"---\nconfigs:\n- config_name: default\n  data_files:\n  - split: {split}\n"
        f"    path: data/{split}.jsonl\n---\n"
    )
    return root


def test_config_structure(tmp_path: Path) -> None:
    rows = random_rows(1, 40, longest=30)
    source = write_rows(tmp_path / "rows.jsonl", rows)
    text = """data:
  datasets:
    - path: <source> # local path, HF Hub ID, or cloud URI
      type: tokenized # only 'tokenized' is currently supported
      max_seq_len: 4096 # truncate individual samples to this length
      split: train
      # ... other HF load_dataset kwargs
      select_columns: [input_ids, labels]
  sample_packing_method: sequential # sequential | multipack
  sample_packing_sequence_len: 8192 # packed bin target length
"""
    loader = run(tmp_path, text, **{"<source>": str(source)})
    batches = list(loader)
    assert all(b["input_ids"].shape == (1, 8192) for b in batches)
    assert len(batches) == 1  # 40 rows of <= 30 tokens fit one bin of 8192
    assert all_heads(batches) == heads_of(rows)
    assert set(batches[0]) >= {"input_ids", "labels", "position_ids", "cu_seqlens"}


def test_local_file_and_local_directory_with_data_files(tmp_path: Path) -> None:
    rows = random_rows(2, 12)
    write_rows(tmp_path / "train.jsonl", rows)
    text = "data:\n  datasets:\n    - path: /data/train.jsonl\n      type: tokenized\n"
    assert all_heads(run(tmp_path, text, **{"/data/": f"{tmp_path}/"})) == heads_of(rows)
    shards = [random_rows(10 + i, 5) for i in range(3)]
    (tmp_path / "dir").mkdir()
    for i, part in enumerate(shards):
        pq.write_table(pa.Table.from_pylist(part), tmp_path / "dir" / f"shard_0{i}.parquet")
    text = "data:\n  datasets:\n    - path: /data/train_dir/\n      type: tokenized\n"
    loader = run(tmp_path, text, **{"/data/train_dir/": f"{tmp_path}/dir/"})
    assert all_heads(loader) == heads_of(*shards)  # file discovery: every shard
    text = "data:\n  datasets:\n    - path: /data/train_dir/\n      data_files: [shard_00.parquet, shard_01.parquet]\n"
    loader = run(tmp_path, text, **{"/data/train_dir/": f"{tmp_path}/dir/"})
    assert all_heads(loader) == heads_of(shards[0], shards[1])  # only the files listed


def test_hub_dataset_split_revision_and_trust_remote_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Hub id is read by datasets.load_dataset(path, split=..., revision=...,
    trust_remote_code=...): the call is recorded and served from a local copy of the repo."""
    import datasets

    ultrachat = random_rows(3, 9)
    copies = {
        "HuggingFaceH4/ultrachat_200k": hub_copy(tmp_path / "ultrachat", "train_sft", ultrachat),
        "org/dataset": hub_copy(tmp_path / "org", "train", random_rows(4, 7)),
    }
    calls: list[tuple[str, dict]] = []
    real = datasets.load_dataset

    def load_dataset(path: str, **kwargs: Any) -> Any:
        calls.append((path, dict(kwargs)))
        local = {k: v for k, v in kwargs.items() if k != "revision"}  # a copy has no revisions
        return real(str(copies.get(path, path)), **local)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never probe the network
    text = """data:
  datasets:
    - path: HuggingFaceH4/ultrachat_200k
      split: train_sft
      type: tokenized
"""
    assert all_heads(run(tmp_path, text)) == heads_of(ultrachat)
    assert calls[-1][0] == "HuggingFaceH4/ultrachat_200k" and calls[-1][1]["split"] == "train_sft"
    text = """data:
  datasets:
    - path: org/dataset
      revision: abc123
      trust_remote_code: true
"""
    assert all_heads(run(tmp_path, text)) == heads_of(random_rows(4, 7))
    path, kwargs = calls[-1]
    assert path == "org/dataset"
    assert kwargs["revision"] == "abc123" and kwargs["trust_remote_code"] is True
    # The same local copy, named by its folder: one load_dataset code path, no network.
    text = f"data:\n  datasets:\n    - path: {copies['HuggingFaceH4/ultrachat_200k']}\n      split: train_sft\n      type: tokenized\n"
    assert all_heads(run(tmp_path, text)) == heads_of(ultrachat)


@pytest.mark.parametrize(
    ("text", "package", "extra"),
    [
        ("data:\n  datasets:\n    - path: gs://my-bucket/data/train/\n", "gcsfs", "gcs"),
        ("data:\n  datasets:\n    - path: abfs://my-container/data/train/\n", "adlfs", "azure"),
    ],
)
def test_cloud_paths_without_their_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # as if the extra were not installed
    registry = sys.modules["fsspec.registry"]._registry
    for scheme in ("gs", "gcs", "abfs", "abfss", "az"):
        if scheme in registry:
            monkeypatch.delitem(registry, scheme)
    with pytest.raises(ConfigError, match=rf"needs {package}.*pip install 'data_io\[{extra}\]'"):
        run(tmp_path, text)


def test_multiple_datasets_are_concatenated_and_shuffled(tmp_path: Path) -> None:
    sft = random_rows(5, 20, longest=40)
    public = random_rows(6, 15, longest=40)
    write_rows(tmp_path / "sft_data.jsonl", sft)
    hub_copy(tmp_path / "public", "train", public)
    text = """data:
  datasets:
    - path: /data/sft_data.jsonl
      type: tokenized
      max_seq_len: 4096
    - path: org/public_dataset
      split: train
      type: tokenized
      max_seq_len: 2048
"""
    loader = run(
        tmp_path,
        text,
        **{
            "/data/sft_data.jsonl": str(tmp_path / "sft_data.jsonl"),
            "org/public_dataset": str(tmp_path / "public"),
        },
    )
    order = [int(b["input_ids"][0, 0]) for b in loader]  # unpacked: one row per item
    assert sorted(order) == heads_of(sft, public)
    assert order != [r["input_ids"][0] for r in sft + public]  # shuffled, not concatenated


def test_sample_packing_sequential_and_multipack(tmp_path: Path) -> None:
    rows = random_rows(7, 60, longest=40)
    write_rows(tmp_path / "rows.jsonl", rows)
    bins = {}
    for method in ("sequential", "multipack"):
        text = f"""data:
  shuffle: false
  datasets:
    - path: {tmp_path / "rows.jsonl"}
  sample_packing_method: {method} # preserve dataset order
  sample_packing_sequence_len: 64
"""
        loader = run(tmp_path, text)
        items = list(loader)
        assert all_heads(items) == heads_of(rows)
        bins[method] = items
    # sequential: in dataset order, a new bin when the next row does not fit.
    in_order = [int(t) for b in bins["sequential"] for t in b["input_ids"].flatten() if t >= 10_000]
    assert in_order == [r["input_ids"][0] for r in rows]
    lengths = [len(r["input_ids"]) for r in rows]
    expected_bins, used = 1, 0
    for n in lengths:
        if used + n > 64:
            expected_bins, used = expected_bins + 1, 0
        used += n
    assert len(bins["sequential"]) == expected_bins
    assert len(bins["multipack"]) <= len(bins["sequential"])  # maximises fill


def test_ring_attention_constraint(tmp_path: Path) -> None:
    """ "each document in a packed bin must have length divisible by 2 × ringattn_parallel_size
    × ulysses_parallel_size", enforced automatically when ringattn_parallel_size is set."""
    rows = random_rows(8, 50, longest=21)
    write_rows(tmp_path / "rows.jsonl", rows)
    path = tmp_path / "ring.yaml"
    path.write_text(
        f"""train:
  batch_size: 1
  ringattn_parallel_size: 2
  ulysses_parallel_size: 2
data:
  num_workers: 0
  datasets:
    - path: {tmp_path / "rows.jsonl"}
      type: tokenized
  sample_packing_method: multipack
  sample_packing_sequence_len: 96
"""
    )
    items = list(build_dataloader(path, 0, 1))
    assert all_heads(items) == heads_of(rows)
    for b in items:
        segments = np.diff(b["cu_seqlens"].numpy())
        assert (segments % 8 == 0).all()  # every document (and the tail) a multiple of 8
        real = b["input_ids"][0] != 0
        assert (b["labels"][0][~real] == -100).all()  # padding never in the loss


def test_column_selection_for_rl(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = []
    for r in random_rows(9, 10, longest=12):
        n = len(r["input_ids"])
        rows.append(
            {**r, "advantages": rng.normal(size=n).tolist(), "logprobs": (-rng.random(n)).tolist()}
        )
    write_rows(tmp_path / "rl.jsonl", rows)
    text = f"""data:
  shuffle: false
  datasets: [{tmp_path / "rl.jsonl"}]
  select_columns: [input_ids, labels, advantages, logprobs]
"""
    first = next(iter(run(tmp_path, text)))
    n = len(rows[0]["input_ids"])
    assert np.allclose(first["advantages"][0, :n].numpy(), rows[0]["advantages"], atol=1e-6)
    assert np.allclose(first["logprobs"][0, :n].numpy(), rows[0]["logprobs"], atol=1e-6)


def test_streaming_entry(tmp_path: Path) -> None:
    """`streaming: true`, another load_dataset keyword: read in order as an IterableDataset."""
    rows = random_rows(11, 30, longest=20)
    write_rows(tmp_path / "rows.jsonl", rows)
    text = f"""data:
  datasets:
    - path: {tmp_path / "rows.jsonl"}
      type: tokenized
      streaming: true
  sample_packing_method: sequential
  sample_packing_sequence_len: 64
"""
    loader = run(tmp_path, text)
    assert loader.identity["kind"] == "tokenized-streaming"
    order = [int(t) for b in loader for t in b["input_ids"].flatten() if t >= 10_000]
    assert order == [r["input_ids"][0] for r in rows]


def test_unknown_entry_keys_still_fail(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("data:\n  datasets:\n    - path: a.jsonl\n      revison: abc123\n")
    with pytest.raises(ConfigError, match=r"data\.datasets\[0\]: unknown key\(s\) 'revison'"):
        load_config(path)
