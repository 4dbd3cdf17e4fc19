"""The keys and interfaces that let KempnerForge and xorl configs drop in (issue 23): a dtype for
raw .bin shards in the config, dataset state_dict()/load_state_dict(), ring-attention padding of
tokenized rows, load_dataset pass-through (name, data_dir, streaming...), streamed rows split over
ranks and workers, the missing-backend message, and --section.key=value on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DataLoader

from data_io.errors import ConfigError, InputError
from data_io.load import (
    DistributedSampler,
    MemoryMappedDataset,
    MixtureDataset,
    MixtureSampler,
    build_dataloader,
    load_config,
)
from data_io.load.datasets.row_sources import RowSource, open_source
from data_io.load.datasets.tokenized_rows import TokenizedRowsDataset
from tests.load.id_shards import write_id_source
from tests.load.rows_fixture import random_rows, write_rows


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# -- data.dtype for raw .bin shards -----------------------------------------------------------
def bin_folder(folder: Path, tokens: np.ndarray) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tokens.tofile(folder / "shard_000.bin")
    return folder


def test_bin_dtype_from_the_config(tmp_path: Path) -> None:
    tokens = np.arange(5000, 5000 + 90, dtype=np.uint16)  # an even count: uint32 would "fit"
    folder = bin_folder(tmp_path / "web", tokens)
    text = f'[train]\nbatch_size = 2\nseq_len = 8\n[data]\ndataset_path = "{folder}"\n'
    text += 'file_pattern = "*.bin"\nnum_workers = 0\nshuffle = false\n'
    # Without a declared dtype: refused, and the message names the config key that fixes it.
    with pytest.raises(InputError, match=r"data\.dtype is not set.*dtype = \"uint16\" in \[data\]"):
        build_dataloader(write(tmp_path / "no.toml", text), 0, 1)
    loader = build_dataloader(write(tmp_path / "ok.toml", text + 'dtype = "uint16"\n'), 0, 1)
    first = next(iter(loader))
    assert first["input_ids"][0].tolist() == tokens[:8].tolist()
    assert first["input_ids"][1].tolist() == tokens[9:17].tolist()
    assert loader.dataset.summary()["dtypes"] == ["uint16"]


def test_bin_dtype_conflict_with_the_metadata_names_both(tmp_path: Path) -> None:
    folder = bin_folder(tmp_path / "web", np.arange(90, dtype=np.uint16))
    (folder / "dataset_metadata.json").write_text(json.dumps({"dtype": "uint16"}))
    base = f'[data]\ndataset_path = "{folder}"\nfile_pattern = "*.bin"\nnum_workers = 0\n'
    base += "[train]\nseq_len = 8\nbatch_size = 2\n"
    with pytest.raises(InputError) as err:
        build_dataloader(
            write(tmp_path / "a.toml", base.replace("[train]", 'dtype = "uint32"\n[train]')), 0, 1
        )
    message = str(err.value)
    assert (
        "data.dtype='uint32'" in message
        and "dataset_metadata.json declares dtype uint16" in message
    )
    # Agreeing with the metadata is fine.
    same = base.replace("[train]", 'dtype = "uint16"\n[train]')
    assert len(build_dataloader(write(tmp_path / "b.toml", same), 0, 1).dataset) == 90 // 9


def test_bin_dtype_per_source_and_bad_values(tmp_path: Path) -> None:
    a = bin_folder(tmp_path / "a", np.arange(90, dtype=np.uint16))
    b = bin_folder(tmp_path / "b", np.arange(10**6, 10**6 + 90, dtype=np.uint32))
    text = f"""
[train]
batch_size = 2
seq_len = 8
[data]
num_workers = 0
file_pattern = "*.bin"
dtype = "uint16"
datasets = [
  {{ path = "{a}", weight = 1.0 }},
  {{ path = "{b}", weight = 1.0, dtype = "uint32" }},
]
"""
    loader = build_dataloader(write(tmp_path / "mix.toml", text), 0, 1)
    assert [d.summary()["dtypes"] for d in loader.dataset.datasets] == [["uint16"], ["uint32"]]
    ids = {int(t) for batch in loader for t in batch["input_ids"][:, 0]}
    assert any(i >= 10**6 for i in ids) and any(i < 90 for i in ids)
    with pytest.raises(ConfigError, match=r"data\.datasets\[1\]\.dtype must be one of .*got 'u32'"):
        load_config(write(tmp_path / "bad.toml", text.replace('"uint32"', '"u32"')))
    with pytest.raises(ConfigError, match=r"data\.dtype must be one of"):
        load_config(
            write(tmp_path / "bad2.toml", text.replace('dtype = "uint16"', 'dtype = "float32"'))
        )
    # A source's own dtype names its key when it contradicts the metadata.
    (b / "dataset_metadata.json").write_text(json.dumps({"dtype": "uint16"}))
    with pytest.raises(InputError, match=r"data\.datasets\[1\]\.dtype='uint32' contradicts"):
        build_dataloader(write(tmp_path / "mix2.toml", text), 0, 1)


# -- state_dict() / load_state_dict() on the map-style datasets -------------------------------
def test_memmap_dataset_and_sampler_resume_kempnerforge_style(tmp_path: Path) -> None:
    """KempnerForge's pattern: a dataset, a DistributedSampler, a torch DataLoader; the
    checkpoint holds the dataset's and the sampler's states."""
    folder = write_id_source(tmp_path / "web", 0, [9 * 30, 9 * 17])

    def run(state: dict | None, batches: int) -> tuple[list[list[int]], dict]:
        dataset = MemoryMappedDataset(folder, 9)
        sampler = DistributedSampler(dataset, num_replicas=1, rank=0, seed=7)
        if state is not None:
            dataset.load_state_dict(state["dataset"])
            sampler.load_state_dict(state["sampler"])
        sampler.set_epoch(dataset.state_dict()["epoch"])
        loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0, drop_last=True)
        got = []
        for batch in loader:
            got.append(batch["input_ids"][:, 0].tolist())
            if len(got) == batches:
                break
        return got, {"dataset": dataset.state_dict(), "sampler": sampler.state_dict()}

    whole, _ = run(None, 11)
    first, saved = run(None, 4)
    saved = json.loads(json.dumps(saved))  # a checkpoint is plain data
    rest, _ = run(saved, 7)
    assert first + rest == whole
    assert saved["dataset"]["samples"] == 47 and saved["dataset"]["kind"] == "MemoryMappedDataset"


def test_dataset_state_delegates_to_its_loader(tmp_path: Path) -> None:
    write_id_source(tmp_path / "web", 0, [9 * 40])
    write_id_source(tmp_path / "code", 1, [9 * 25])
    text = f"""
[train]
batch_size = 3
seq_len = 8
seed = 5
[data]
num_workers = 0
datasets = [{{ path = "{tmp_path}/web", weight = 0.6 }}, {{ path = "{tmp_path}/code", weight = 0.4 }}]
"""
    path = write(tmp_path / "job.toml", text)
    whole = [b["input_ids"][:, 0].tolist() for b in build_dataloader(path, 0, 1)]
    loader = build_dataloader(path, 0, 1)
    first = []
    for batch in loader:
        first.append(batch["input_ids"][:, 0].tolist())
        if len(first) == 5:
            break
    saved = json.loads(json.dumps(loader.dataset.state_dict()))
    assert saved["kind"] == "MixtureDataset" and saved["loader"]["state"]["step"] == 5
    # Restored through the dataset of a fresh loader: the loader continues exactly.
    fresh = build_dataloader(path, 0, 1)
    fresh.dataset.load_state_dict(saved)
    assert first + [b["input_ids"][:, 0].tolist() for b in fresh] == whole
    # A state loaded before any loader reads the dataset waits for one (KempnerForge builds the
    # dataset, loads the checkpoint, then the loader).
    from data_io.load.dataloader.stateful import StatefulLoader

    lone = MixtureDataset(
        [MemoryMappedDataset(tmp_path / n, 9) for n in ("web", "code")], ["web", "code"]
    )
    lone.load_state_dict(saved)
    later = StatefulLoader(
        lone, fresh.order, batch_size=3, rank=0, world_size=1, identity=fresh.identity
    )
    assert later.state == saved["loader"]["state"]


def test_mixture_sampler_and_dataset_state_resume(tmp_path: Path) -> None:
    a = MemoryMappedDataset(write_id_source(tmp_path / "a", 0, [9 * 30]), 9)
    b = MemoryMappedDataset(write_id_source(tmp_path / "b", 1, [9 * 20]), 9)

    def run(state: dict | None, batches: int) -> tuple[list[list[int]], dict]:
        mixture = MixtureDataset([a, b], ["a", "b"])
        sampler = MixtureSampler(mixture.cumulative_sizes, [0.5, 0.5], 1, 0, seed=3, batch_size=2)
        if state is not None:
            mixture.load_state_dict(state["dataset"])
            sampler.load_state_dict(state["sampler"])
        loader = DataLoader(mixture, batch_size=2, sampler=sampler, num_workers=0)
        got = []
        for batch in loader:
            got.append(batch["input_ids"][:, 0].tolist())
            if len(got) == batches:
                break
        return got, {"dataset": mixture.state_dict(), "sampler": sampler.state_dict()}

    whole, _ = run(None, 20)
    first, saved = run(None, 6)
    rest, _ = run(saved, 14)
    assert first + rest == whole


def test_dataset_state_refuses_other_data(tmp_path: Path) -> None:
    dataset = MemoryMappedDataset(write_id_source(tmp_path / "a", 0, [9 * 30]), 9)
    state = dataset.state_dict()
    with pytest.raises(ConfigError, match="not a MemoryMappedDataset state"):
        dataset.load_state_dict({"epoch": 1})
    with pytest.raises(ConfigError, match="not a MemoryMappedDataset state"):
        dataset.load_state_dict({**state, "extra": 1})
    with pytest.raises(ConfigError, match="saved by a MixtureDataset"):
        dataset.load_state_dict({**state, "kind": "MixtureDataset"})
    with pytest.raises(
        ConfigError, match="saved for 31 samples, and this MemoryMappedDataset has 30"
    ):
        dataset.load_state_dict({**state, "samples": 31})
    other = MemoryMappedDataset(write_id_source(tmp_path / "b", 1, [9 * 30]), 9)
    with pytest.raises(ConfigError, match="saved for other data"):
        other.load_state_dict(state)
    with pytest.raises(ConfigError, match="epoch must be an integer >= 0"):
        dataset.load_state_dict({**state, "epoch": -1})
    dataset.load_state_dict({**state, "epoch": 4})
    assert dataset.state_dict()["epoch"] == 4


# -- ring attention: rows padded to a multiple of 2 x ring x ulysses ----------------------------
def expected_ring_items(rows: list[dict], capacity: int, multiple: int) -> list[dict]:
    """An independent re-derivation: next-fit of padded rows in order, then each item built
    token by token."""
    bins, current, used = [], [], 0
    for row in rows:
        size = -(-len(row["input_ids"]) // multiple) * multiple
        if used + size > capacity:
            bins.append(current)
            current, used = [], 0
        current.append(row)
        used += size
    bins.append(current)
    items = []
    for rows_in_bin in bins:
        ids, labels, positions, bounds = [], [], [], [0]
        for row in rows_in_bin:
            n = len(row["input_ids"])
            size = -(-n // multiple) * multiple
            for k in range(size):
                ids.append(row["input_ids"][k] if k < n else 0)
                labels.append(-100 if k == 0 or k >= n else row["labels"][k])
                positions.append(k)
            bounds.append(bounds[-1] + size)
        rest = capacity - bounds[-1]
        ids += [0] * rest
        labels += [-100] * rest
        positions += list(range(rest))
        if rest:
            bounds.append(capacity)
        items.append(
            {"input_ids": ids, "labels": labels, "position_ids": positions, "cu_seqlens": bounds}
        )
    return items


@pytest.mark.parametrize(("ring", "ulysses"), [(2, 1), (2, 2), (3, 1)])
def test_ring_padding_matches_a_rederivation(tmp_path: Path, ring: int, ulysses: int) -> None:
    rows = random_rows(4, 30, longest=17)
    path = write_rows(tmp_path / "rows.jsonl", rows)
    multiple = 2 * ring * ulysses
    capacity = 4 * multiple * (-(-17 // multiple))
    text = f"""
train: {{batch_size: 1, ringattn_parallel_size: {ring}, ulysses_parallel_size: {ulysses}}}
data:
  num_workers: 0
  shuffle: false
  dataset_prepared_path: {tmp_path / "prep"}
  sample_packing_method: sequential
  sample_packing_sequence_len: {capacity}
  datasets: [{{path: {path}, type: tokenized}}]
"""
    loader = build_dataloader(write(tmp_path / "x.yaml", text), 0, 1)
    dataset = loader.dataset
    assert dataset.ring_multiple == multiple
    expected = expected_ring_items(rows, capacity, multiple)
    assert len(dataset) == len(expected)
    for i, want in enumerate(expected):
        item = dataset[i]
        for key, values in want.items():
            assert item[key].tolist() == values, (i, key)
        assert all(int(b) % multiple == 0 for b in item["cu_seqlens"][:-1])


def test_ring_padding_unpacked_and_errors(tmp_path: Path) -> None:
    rows = [
        {"input_ids": [1, 2, 3], "labels": [1, 2, 3]},
        {"input_ids": [4] * 9, "labels": [4] * 9},
    ]
    source = RowSource(str(write_rows(tmp_path / "r.jsonl", rows)))
    unpacked = TokenizedRowsDataset(
        [source], shuffle=False, dataset_prepared_path=None, ring_multiple=4
    )
    assert unpacked.item_length == 12  # the longest row (9) padded to a multiple of 4
    first = unpacked[0]
    assert first["input_ids"].tolist() == [1, 2, 3, 0] + [0] * 8
    assert first["labels"].tolist() == [1, 2, 3, -100] + [-100] * 8  # unpacked: row's 1st kept
    assert first["position_ids"].tolist() == [0, 1, 2, 3, *range(8)]
    assert first["cu_seqlens"].tolist() == [0, 4, 12]
    with pytest.raises(InputError, match=r"has 9 tokens, 12 once padded to a multiple of 4"):
        TokenizedRowsDataset(
            [source],
            sample_packing_method="sequential",
            sample_packing_sequence_len=8,
            dataset_prepared_path=None,
            ring_multiple=4,
        )
    with pytest.raises(ConfigError, match="not a multiple of 4"):
        TokenizedRowsDataset(
            [source],
            sample_packing_method="sequential",
            sample_packing_sequence_len=10,
            ring_multiple=4,
        )
    text = f"""
train: {{ringattn_parallel_size: 2, ulysses_parallel_size: 2}}
data: {{sample_packing_method: sequential, sample_packing_sequence_len: 20, datasets: [{tmp_path / "r.jsonl"}]}}
"""
    with pytest.raises(
        ConfigError, match=r"sample_packing_sequence_len=20 is not a multiple of .* = 8.*e\.g\. 24"
    ):
        load_config(write(tmp_path / "bad.yaml", text))
    with pytest.raises(ConfigError, match=r"train\.ringattn_parallel_size must be >= 1"):
        load_config(
            write(
                tmp_path / "bad2.yaml",
                text.replace("ringattn_parallel_size: 2", "ringattn_parallel_size: 0"),
            )
        )


# -- load_dataset pass-through: name, data_dir, trust_remote_code; metrics_name -----------------
def repo_folder(root: Path) -> Path:
    """A local copy of a Hub dataset repository with two configs (README YAML)."""
    write_rows(root / "chat" / "train.jsonl", random_rows(1, 6))
    write_rows(root / "code" / "train.jsonl", random_rows(2, 9))
    (root / "README.md").write_text(
        "---\nconfigs:\n"
        "- config_name: chat\n  data_files:\n  - split: train\n    path: chat/*.jsonl\n"
        "- config_name: code\n  data_files:\n  - split: train\n    path: code/*.jsonl\n"
        "---\n"
    )
    return root


def test_name_is_the_hub_config_and_data_dir_a_sub_folder(tmp_path: Path) -> None:
    repo = repo_folder(tmp_path / "repo")
    cache = str(tmp_path / "hf")
    code = open_source(RowSource(str(repo), name="code", trust_remote_code=True), cache_dir=cache)
    assert [r[0] for r in code["input_ids"]] == [r["input_ids"][0] for r in random_rows(2, 9)]
    chat = open_source(RowSource(str(repo), data_dir="chat"), cache_dir=cache)
    assert len(chat) == 6
    with pytest.raises(InputError, match=r"load_dataset\(.*name='nope'.*check name"):
        open_source(RowSource(str(repo), name="nope"), cache_dir=cache)
    single = RowSource(str(repo / "chat" / "train.jsonl"), name="chat")
    with pytest.raises(ConfigError, match=r"name selects a config .* are plain files: remove name"):
        open_source(single, cache_dir=cache)
    # Two configs of one repository are two sources, named apart by their config.
    text = f"""
data:
  dataset_prepared_path: {tmp_path / "prep"}
  num_workers: 0
  datasets:
    - {{path: {repo}, name: chat, type: tokenized}}
    - {{path: {repo}, name: code, type: tokenized, metrics_name: my-code}}
"""
    loader = build_dataloader(write(tmp_path / "x.yaml", text), 0, 1)
    summary = loader.dataset.summary()
    assert [s["name"] for s in summary["sources"]] == [f"{repo} (chat)", "my-code"]
    assert summary["rows"] == 15


def test_source_keys_belong_to_their_kind(tmp_path: Path) -> None:
    cases = [
        # (A shard folder with an xorl key is read as xorl's: only an hf_name source stays.)
        ("datasets: [{hf_name: org/x, streaming: true}]", "streaming belong.*data.hf_streaming"),
        ("datasets: [{hf_name: org/x, metrics_name: w}]", "metrics_name belong.*named by name"),
        (
            "datasets: [{path: a.jsonl, type: tokenized, dtype: uint16}]",
            "dtype belong.*shard/HF-text",
        ),
        ("datasets: [{path: a.jsonl, type: tokenized, revison: x}]", r"unknown key\(s\) 'revison'"),
        (
            "sample_packing_method: multipack\n  sample_packing_sequence_len: 8\n"
            "  datasets: [{path: a.jsonl, streaming: true}]",
            "streaming: true needs data.sample_packing_method: sequential",
        ),
        (
            "sample_packing_method: sequential\n  sample_packing_sequence_len: 8\n"
            "  datasets: [{path: a.jsonl, streaming: true}, {path: b.jsonl}]",
            "some tokenized sources have streaming: true and others not",
        ),
    ]
    for i, (body, pattern) in enumerate(cases):
        with pytest.raises(ConfigError, match=pattern):
            load_config(write(tmp_path / f"c{i}.yaml", f"data:\n  {body}\n"))


# -- streaming tokenized rows ------------------------------------------------------------------
def stream_config(tmp_path: Path, files: int, workers: int, batch: int = 2) -> Path:
    for i in range(files):
        write_rows(tmp_path / "d" / f"part{i}.jsonl", random_rows(i, 12, longest=12))
    return write(
        tmp_path / f"s{files}_{workers}.yaml",
        f"""
train: {{batch_size: {batch}}}
data:
  num_workers: {workers}
  sample_packing_method: sequential
  sample_packing_sequence_len: 24
  datasets: [{{path: {tmp_path / "d"}, type: tokenized, streaming: true}}]
""",
    )


def heads(batches: list[dict]) -> list[int]:
    return [int(t) for b in batches for t in b["input_ids"].flatten() if t >= 10_000]


@pytest.mark.parametrize(("files", "world"), [(4, 2), (1, 2), (3, 2)])
def test_streamed_rows_split_over_ranks(tmp_path: Path, files: int, world: int) -> None:
    """Whole files per rank when they divide, else every world-th row: never the same row."""
    path = stream_config(tmp_path, files, 0, batch=1)
    seen = [heads(list(build_dataloader(path, r, world))) for r in range(world)]
    every = sorted(r["input_ids"][0] for i in range(files) for r in random_rows(i, 12, longest=12))
    assert sorted(seen[0] + seen[1]) == every
    assert not set(seen[0]) & set(seen[1]) and seen[0] and seen[1]


def test_streamed_rows_items_and_order(tmp_path: Path) -> None:
    path = stream_config(tmp_path, 1, 0, batch=1)
    items = [b for b in build_dataloader(path, 0, 1)]
    rows = random_rows(0, 12, longest=12)
    # Read in order, packed next-fit: the heads come in the file's order.
    assert heads(items) == [r["input_ids"][0] for r in rows]
    for b in items:
        bounds = b["cu_seqlens"].tolist()
        assert bounds[0] == 0 and bounds[-1] == 24 and b["input_ids"].shape == (1, 24)
        assert all(b["labels"][0, s] == -100 for s in bounds[:-1])


@pytest.mark.parametrize("workers", [0, 2])
def test_streamed_rows_resume_exactly(tmp_path: Path, workers: int) -> None:
    path = stream_config(tmp_path, 4, workers)
    whole = [b["input_ids"].tolist() for b in build_dataloader(path, 0, 1)]
    loader = build_dataloader(path, 0, 1)
    first = []
    for batch in loader:
        first.append(batch["input_ids"].tolist())
        if len(first) == 3:
            break
    saved = json.loads(json.dumps(loader.state_dict()))
    fresh = build_dataloader(path, 0, 1)
    fresh.load_state_dict(saved)
    rest = [b["input_ids"].tolist() for b in fresh]
    assert first + rest == whole and len(whole) > 4
    other = build_dataloader(stream_config(tmp_path, 4, 1 if workers else 2), 0, 1)
    with pytest.raises(ConfigError):
        other.load_state_dict(saved)
        next(iter(other))


@pytest.mark.parametrize(("world", "workers"), [(1, 2), (2, 2), (2, 0)])
def test_streamed_rows_split_by_rows_resume_exactly(
    tmp_path: Path, world: int, workers: int
) -> None:
    # 3 files over 2 or 4 streams: each stream reads every G-th row. Before, a resumed stream
    # skipped the source's first rows (datasets' skip runs before the row split), so it read
    # other streams' rows and skipped some of its own.
    path = stream_config(tmp_path, 3, workers)
    for rank in range(world):
        whole = [b["input_ids"].tolist() for b in build_dataloader(path, rank, world)]
        assert len(whole) > 2
        for stop in (1, len(whole) // 2):
            loader = build_dataloader(path, rank, world)
            first = [b["input_ids"].tolist() for _, b in zip(range(stop), loader, strict=False)]
            fresh = build_dataloader(path, rank, world)
            fresh.load_state_dict(json.loads(json.dumps(loader.state_dict())))
            assert first + [b["input_ids"].tolist() for b in fresh] == whole


# -- remote backends ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "package", "extra"),
    [("gs://bucket/rows/", "gcsfs", "gcs"), ("abfs://container/rows/", "adlfs", "azure")],
)
def test_missing_backend_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, url: str, package: str, extra: str
) -> None:
    # Simulate the backend not being installed, even where it is.
    monkeypatch.setitem(sys.modules, package, None)
    registry = sys.modules["fsspec.registry"]._registry
    for scheme in ("gs", "gcs", "abfs", "abfss", "az"):
        if scheme in registry:
            monkeypatch.delitem(registry, scheme)
    with pytest.raises(ConfigError) as err:
        open_source(RowSource(url))
    message = str(err.value)
    assert f"needs {package}" in message and f"pip install 'data_io[{extra}]'" in message


def test_the_extras_exist() -> None:
    import tomllib

    project = tomllib.loads(Path(__file__).parents[2].joinpath("pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert extras["gcs"][0].startswith("gcsfs") and extras["azure"][0].startswith("adlfs")


# -- --section.key=value on the command line ------------------------------------------------------
def test_dotted_overrides_on_the_command_line(tmp_path: Path) -> None:
    write_id_source(tmp_path / "web", 0, [9 * 40])
    path = write(
        tmp_path / "job.toml",
        f'[train]\nbatch_size = 2\nseq_len = 8\n[data]\ndataset_path = "{tmp_path}/web"\nnum_workers = 0\n',
    )

    def check(*args: str) -> subprocess.CompletedProcess:
        command = [
            sys.executable,
            "-m",
            "data_io",
            "loader-check",
            str(path),
            "--json",
            "--batches",
            "1",
            *args,
        ]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    done = check("--train.batch_size=4", "train.seq_len=6", "--train.batch_size=5")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["batch_size"] == 5 and report["seq_len"] == 6  # the last one typed wins
    # KempnerForge's trainer overrides, passed on as they are: the trainer's, skipped as the
    # same keys in the job file are, and named.
    done = check("--train.max_steps=10", "--optimizer.lr=1e-3", "--train.batch_size=4")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["batch_size"] == 4
    assert report["trainer_overrides"] == ["train.max_steps", "optimizer.lr"]
    done = check("--data.num_wrokers=2")
    assert done.returncode == 1
    assert (
        "unknown key data.num_wrokers (close to 'num_workers': a typo?); [data] keys are"
        in done.stderr
    )
    assert "num_workers" in done.stderr
    done = check("--data.num_workers")
    assert done.returncode == 1 and "is not KEY=VALUE" in done.stderr
    done = check("--bogus")
    assert done.returncode == 2 and "unrecognized arguments: --bogus" in done.stderr


def test_a_bad_streamed_row_says_which_stream_its_number_counts(tmp_path: Path) -> None:
    path = stream_config(tmp_path, 1, 0, batch=1)
    rows = random_rows(0, 12, longest=12)
    rows[5]["labels"] = rows[5]["labels"][:-1]  # one label short
    write_rows(tmp_path / "d" / "part0.jsonl", rows)
    with pytest.raises(InputError, match=r"row 5.*stream 0 of 1"):
        list(build_dataloader(path, 0, 1))
