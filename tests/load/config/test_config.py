"""LoaderConfig: the seeds' files load unchanged, bad keys and values are named, and
build_dataloader / build_eval_loader / `data_io loader-check` build what the config says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import ConfigError, InputError
from data_io.load import (
    LoaderConfig,
    build_dataloader,
    build_eval_loader,
    build_eval_loaders,
    load_config,
)
from data_io.load.config import trainer_overrides
from tests.load.id_shards import write_id_source

KEMPNERFORGE_JOB = """
[model]
dim = 512
n_layers = 4

[train]
batch_size = 4
seq_len = 8
seed = 3
max_steps = 1000
grad_accum_steps = 2

[data]
num_workers = 0
pin_memory = false
mix_temperature = 2.0
datasets = [
  {{ path = "{root}/web", weight = 0.7 }},
  {{ path = "{root}/code", weight = 0.3, name = "code" }},
]

[[data.phases]]
start_step = 5
dataset_weights = {{ web = 0.2, code = 0.8 }}
lr_scale = 0.5

[eval]
enabled = true
interval = 100
steps = 3
dataset_path = "{root}/val"
"""


@pytest.fixture()
def root(tmp_path: Path) -> Path:
    write_id_source(tmp_path / "web", 0, [9 * 40])
    write_id_source(tmp_path / "code", 1, [9 * 20])
    write_id_source(tmp_path / "val", 2, [9 * 5])
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_kempnerforge_job_file(root: Path) -> None:
    config = load_config(write(root / "job.toml", KEMPNERFORGE_JOB.format(root=root)))
    assert config.train.batch_size == 4 and config.train.seq_len == 8
    assert [s.name for s in config.data.datasets] == ["", "code"]
    assert config.data.phases[0].lr_scale == 0.5
    assert config.data.file_pattern == "*.npy" and config.data.prefetch_factor == 2  # defaults
    loader = build_dataloader(config, rank=0, world_size=1)
    assert loader.names == ["web", "code"]
    batch = next(iter(loader))
    assert batch["input_ids"].shape == (4, 8) and batch["dataset_idx"].shape == (4,)
    assert [round(w, 4) for w in loader.order.phases[1].weights] == [
        round(x / (x + y), 4) for x, y in [(0.2**0.5, 0.8**0.5)]
    ] + [round(0.8**0.5 / (0.2**0.5 + 0.8**0.5), 4)]
    evaluation = build_eval_loader(config, rank=0, world_size=1)
    assert evaluation is not None and len(list(evaluation)) == 3


def test_a_dict_of_sections_builds_the_loader_the_file_builds_and_other_types_are_named(
    root: Path,
) -> None:
    import tomllib

    from data_io.errors import ConfigError

    text = KEMPNERFORGE_JOB.format(root=root)
    from_file = build_dataloader(write(root / "job.toml", text), rank=0, world_size=1)
    from_dict = build_dataloader(tomllib.loads(text), rank=0, world_size=1)
    assert from_dict.names == from_file.names
    first, second = next(iter(from_file)), next(iter(from_dict))
    assert all((first[k] == second[k]).all() for k in ("input_ids", "dataset_idx"))
    for wrong in (5, ["job.toml"]):
        with pytest.raises(ConfigError, match="config must be a LoaderConfig, the path of a"):
            build_dataloader(wrong, rank=0, world_size=1)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="config must be a LoaderConfig, the path of a"):
            build_eval_loaders(wrong, rank=0, world_size=1)  # type: ignore[arg-type]
    # The eval loaders take the same dict (it was a pathlib TypeError).
    eval_from_file = build_eval_loader(write(root / "job.toml", text), rank=0, world_size=1)
    eval_from_dict = build_eval_loader(tomllib.loads(text), rank=0, world_size=1)
    assert eval_from_file is not None and eval_from_dict is not None
    first, second = next(iter(eval_from_file)), next(iter(eval_from_dict))
    assert (first["input_ids"] == second["input_ids"]).all()


def test_yaml_and_overrides(root: Path) -> None:
    text = f"""
train: {{batch_size: 2, seq_len: 8}}
data:
  dataset_path: {root}/web
  num_workers: 0
"""
    path = write(root / "job.yaml", text)
    config = load_config(path, ["data.num_workers=1", "train.seed=9", "data.shuffle=false"])
    assert config.data.num_workers == 1 and config.train.seed == 9 and not config.data.shuffle
    loader = build_dataloader(path, rank=1, world_size=2)
    ids = [int(i) for i in next(iter(loader))["input_ids"][:, 0]]
    assert len(ids) == 2
    mixture = load_config(
        write(root / "mix.toml", KEMPNERFORGE_JOB.format(root=root)), ["data.datasets.1.weight=2"]
    )
    assert mixture.data.datasets[1].weight == 2.0


def test_xorl_style_config_parses(root: Path) -> None:
    text = """
data:
  datasets:
    - path: /data/train.jsonl
      type: tokenized
      max_seq_len: 4096
    - path: org/public_dataset
      split: train_sft
      type: tokenized
      revision: abc123
  select_columns: [input_ids, labels]
  sample_packing_method: multipack
  sample_packing_sequence_len: 8192
model: {name: whatever}
"""
    config = load_config(write(root / "xorl.yaml", text))
    assert [s.type for s in config.data.datasets] == ["tokenized", "tokenized"]
    assert config.data.sample_packing_method == "multipack"
    assert config.data.datasets[1].revision == "abc123"


def test_defaults_are_the_seeds() -> None:
    config = LoaderConfig()
    assert (config.data.num_workers, config.data.pin_memory, config.data.prefetch_factor) == (
        4,
        True,
        2,
    )
    assert config.data.hf_dataset_split == "train" and config.data.hf_dataset_text_field == "text"
    assert config.data.mix_temperature == 1.0 and not config.eval.enabled
    assert config.eval.hf_dataset_split == "validation"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[data]\ndatset_path = 'x'\n", "datset_path"),
        ("[data]\nnum_workers = 'many'\n", "num_workers"),
        ("[eval]\nstepz = 3\n", "stepz"),
        (
            "[data]\ndatasets = [{path = 'a'}, {path = 'b', wieght = 1}]\n",
            r"data\.datasets\[1\]: unknown key\(s\) 'wieght'",
        ),
        ("[data]\ndatasets = [{path = 'a', hf_name = 'b'}]\n", r"datasets\[0\]: set exactly one"),
        ("[data]\ndatasets = [{path = 'a', weight = 0}]\n", r"datasets\[0\].weight must be > 0"),
        ("[data]\ndatasets = [{path = 'x/a'}, {path = 'y/a'}]\n", "named \\['a'\\]"),
        (
            "[data]\ndatasets = [{path = 'a'}]\nphases = [{start_step = 3, dataset_weights = {b = 1}}]\n",
            "unknown sources",
        ),
        (
            "[data]\ndatasets = [{path = 'a'}]\nphases = [{start_step = 3, dataset_weights = {a = 0}}]\n",
            "all zero",
        ),
        (
            "[data]\ndatasets = [{path = 'a'}]\nanneal_start_step = 4\nanneal_weights = {a = 1}\n"
            "phases = [{start_step = 3, dataset_weights = {a = 1}}]\n",
            "exclusive",
        ),
        ("[data]\nphases = [{start_step = 3}]\n", "weight the sources of data.datasets"),
        ("[data]\nsample_packing_method = 'greedy'\n", "sequential, multipack"),
        ("[data]\nposition_ids = true\n", "pack_sequences"),
        ("[eval]\nenabled = true\n", "eval.dataset_path"),
        ("[train]\nbatch_size = 0\n", "train.batch_size must be >= 1"),
        ("[data]\nmix_temperature = -1.0\n", "mix_temperature"),
        ("[data]\ndatasets = [{path = 'a', type = 'chat'}]\n", "'tokenized' or unset"),
        ("[data\n", "not valid TOML"),
        ("data = 3\n", r"\[data\] must be a table"),
    ],
)
def test_bad_configs_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path / "bad.toml", text))


def test_bad_override_and_file(tmp_path: Path) -> None:
    path = write(tmp_path / "ok.toml", "[data]\ndataset_path = 'x'\n")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_config(path, ["data.num_workers"])
    with pytest.raises(ConfigError, match="nope"):
        load_config(path, ["data.nope=1"])
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"\.toml, \.yaml or \.yml"):
        load_config(write(tmp_path / "job.ini", "x"))
    (tmp_path / "latin1.yaml").write_bytes("data:\n  dataset_path: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.yaml: not UTF-8 text \(byte 25: invalid"):
        load_config(tmp_path / "latin1.yaml")


def test_no_source_and_bad_paths(tmp_path: Path) -> None:
    from data_io.errors import InputError

    with pytest.raises(ConfigError, match="no data source"):
        build_dataloader(LoaderConfig(), 0, 1)
    config = load_config(None, [f"data.dataset_path={tmp_path / 'none'}"])
    with pytest.raises(InputError, match="does not exist"):
        build_dataloader(config, 0, 1)
    (tmp_path / "empty").mkdir()
    write_id_source(tmp_path / "ok", 0, [9 * 3])
    config = load_config(
        None,
        [
            "data.datasets=[{{path: {}}}, {{path: {}}}]".format(
                tmp_path / "ok", tmp_path / "empty"
            ),
            "train.seq_len=8",
        ],
    )
    with pytest.raises(InputError, match="no files match"):
        build_dataloader(config, 0, 1)
    # A folder of .bin shards: the message names the config key that sets the pattern.
    (tmp_path / "bins").mkdir()
    np.arange(27, dtype=np.uint16).tofile(tmp_path / "bins" / "shard_00000.bin")
    config = load_config(None, [f"data.dataset_path={tmp_path / 'bins'}", "train.seq_len=8"])
    with pytest.raises(InputError, match=r"pass data\.file_pattern='\*\.bin'"):
        build_dataloader(config, 0, 1)
    config = load_config(
        None, ["data.datasets=[{{path: {}}}]".format(tmp_path / "bins"), "train.seq_len=8"]
    )
    with pytest.raises(InputError, match=r"pass data\.file_pattern='\*\.bin'"):
        build_dataloader(config, 0, 1)
    config = load_config(
        None,
        [
            "data.datasets=[{{path: {}, file_pattern: 'x*.npy'}}]".format(tmp_path / "bins"),
            "train.seq_len=8",
        ],
    )
    with pytest.raises(InputError, match=r"pass data\.datasets\[0\]\.file_pattern="):
        build_dataloader(config, 0, 1)


def test_pack_sequences_needs_an_eos(root: Path) -> None:
    config = load_config(None, [f"data.dataset_path={root}/web", "data.pack_sequences=true"])
    with pytest.raises(ConfigError, match=r"eos_token_id or data\.tokenizer_path"):
        build_dataloader(config, 0, 1)
    config = load_config(
        None,
        [
            f"data.dataset_path={root}/web",
            "data.pack_sequences=true",
            "data.eos_token_id=5",
            "data.cu_seqlens=true",
            "data.num_workers=0",
            "train.seq_len=8",
        ],
    )
    batch = next(iter(build_dataloader(config, 0, 1)))
    assert {"doc_ids", "cu_seqlens"} <= set(batch)


def test_vocab_size_is_checked(root: Path) -> None:
    config = load_config(
        None,
        [
            f"data.dataset_path={root}/web",
            "data.vocab_size=100",
            "data.num_workers=0",
            "train.seq_len=8",
        ],
    )
    from data_io.errors import InputError

    with pytest.raises(InputError, match="not below vocab_size=100"):
        next(iter(build_dataloader(config, 0, 1)))


def test_loader_check_cli(root: Path) -> None:
    path = write(root / "job.toml", KEMPNERFORGE_JOB.format(root=root))
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "loader-check", str(path), "--world-size", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for text in ("mixture data, rank 0 of 2", "web", "code", "lr_scale", "first batch", "eval: 5"):
        assert text in done.stdout
    assert "tokens/s" in done.stdout  # the rate after the first batch
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "loader-check", str(path), "--batches", "1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # One batch: its time is measured, a rate after it is not (was "then 0 tokens/s").
    assert "first batch:" in done.stdout and "tokens/s" not in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "loader-check", str(path), "--json", "data.bogus=1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "bogus" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "loader-check", str(path), "--json", "--batches", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    report = json.loads(done.stdout)
    assert report["steps_per_epoch"] == (40 + 20) // 4
    assert sum(report["tokens_per_source"].values()) == 2 * 4 * 8
    assert np.isclose(report["seq_len"], 8)


def test_xorl_rows_through_build_dataloader(tmp_path: Path) -> None:
    from tests.load.rows_fixture import random_rows, write_rows

    rows = random_rows(3, 40, longest=12)
    write_rows(tmp_path / "a.jsonl", rows[:25])
    write_rows(tmp_path / "b.parquet", rows[25:])
    text = f"""
train: {{batch_size: 1, seed: 1}}
data:
  num_workers: 0
  dataset_prepared_path: {tmp_path / "prepared"}
  sample_packing_method: multipack
  sample_packing_sequence_len: 32
  datasets:
    - {{path: {tmp_path / "a.jsonl"}, type: tokenized}}
    - {{path: {tmp_path / "b.parquet"}, type: tokenized, max_seq_len: 10}}
"""
    loader = build_dataloader(write(tmp_path / "xorl.yaml", text), 0, 1)
    batches = list(loader)
    assert batches and all(b["input_ids"].shape == (1, 32) for b in batches)
    # Row heads carry ids >= 10,000 (the other tokens are < 1,000): each row once per epoch.
    heads = [int(t) for b in batches for t in b["input_ids"].flatten() if t >= 10_000]
    assert sorted(heads) == sorted(r["input_ids"][0] for r in rows)
    supervised = sum(int((b["labels"] != -100).sum()) for b in batches)
    expected = sum(sum(x != -100 for x in r["labels"][1:]) for r in rows[:25]) + sum(
        sum(x != -100 for x in r["labels"][1:10]) for r in rows[25:]
    )
    assert supervised == expected  # each row's first label is masked in a packed bin
    assert (tmp_path / "prepared").is_dir()


def test_xorl_shorthand_and_pack_share_the_loader_cache(tmp_path: Path) -> None:
    from data_io.cli import main
    from tests.load.rows_fixture import random_rows, write_rows

    write_rows(tmp_path / "a.jsonl", random_rows(4, 30, longest=10))
    write_rows(tmp_path / "b.parquet", random_rows(5, 20, longest=10))
    # No `type: tokenized`, a bare path string, and xorl's data.seed: read as xorl means them.
    text = f"""
data:
  seed: 3
  shuffle: false
  num_workers: 0
  dataset_prepared_path: {tmp_path / "prepared"}
  sample_packing_method: sequential
  sample_packing_sequence_len: 24
  datasets:
    - {tmp_path / "a.jsonl"}
    - path: {tmp_path / "b.parquet"}
"""
    path = write(tmp_path / "xorl.yaml", text)
    config = load_config(path)
    assert [s.type for s in config.data.datasets] == ["tokenized", "tokenized"]
    assert main(["pack", str(path)]) == 0
    plans = sorted(p.name for p in (tmp_path / "prepared").iterdir())
    loader = build_dataloader(path, 0, 1)
    assert loader.dataset.summary()["cache_reused"]  # the plan `pack` wrote
    assert not loader.dataset.shuffle  # data.shuffle reaches the rows
    assert sorted(p.name for p in (tmp_path / "prepared").iterdir()) == plans


def test_datasets_override_the_single_source_fields(root: Path) -> None:
    from data_io.load.check import check_loader
    from data_io.load.config import overridden_sources

    text = KEMPNERFORGE_JOB.format(root=root).replace(
        "[data]\n", f"[data]\ndataset_path = '{root}/val'\n", 1
    )
    config = load_config(write(root / "both.toml", text))
    assert overridden_sources(config.data) == {"data.dataset_path": "data.datasets"}
    report = check_loader(config, batches=1)
    assert report["kind"] == "mixture"
    assert report["overridden"] == {"data.dataset_path": "data.datasets"}


def test_dataset_path_overrides_hf_dataset_name_as_in_kempnerforge(root: Path, capsys) -> None:
    """KempnerForge's train.py reads the shards when data.dataset_path is set; a job file that
    also names an HF dataset loads as it does there, and loader-check says which is read."""
    from data_io.load.check import check_loader, print_report
    from data_io.load.config import overridden_sources

    text = (
        f"[train]\nbatch_size = 2\nseq_len = 8\n[data]\ndataset_path = '{root}/web'\n"
        "num_workers = 0\nhf_dataset_name = 'nowhere/never-read'\n"
        f"[eval]\nenabled = true\ndataset_path = '{root}/val'\nhf_dataset_name = 'never/read'\n"
    )
    config = load_config(write(root / "kf_both.toml", text))
    assert overridden_sources(config.data) == {"data.hf_dataset_name": "data.dataset_path"}
    report = check_loader(config, batches=1)
    alone = text.replace("hf_dataset_name = 'nowhere/never-read'\n", "")
    shards_alone = check_loader(load_config(write(root / "kf_one.toml", alone)), batches=1)
    assert (report["kind"], report["sources"]) == (shards_alone["kind"], shards_alone["sources"])
    print_report(report, as_json=False)
    shown = capsys.readouterr().out
    assert "note: data.dataset_path overrides data.hf_dataset_name, which is not read" in shown
    assert "note: eval.dataset_path overrides eval.hf_dataset_name, which is not read" in shown
    assert report["overridden"] == {
        "data.hf_dataset_name": "data.dataset_path",
        "eval.hf_dataset_name": "eval.dataset_path",
    }


def test_kempnerforge_overrides_and_build_dataloader_overrides(root: Path) -> None:
    """``--section.key=value`` (KempnerForge's spelling) and overrides of build_dataloader."""
    path = write(
        root / "kf.yaml",
        f"train: {{batch_size: 2, seq_len: 8}}\ndata: {{dataset_path: {root}/web, num_workers: 0}}\n",
    )
    config = load_config(path, ["--data.num_workers=2", "--train.seed=5"])
    assert config.data.num_workers == 2 and config.train.seed == 5
    loader = build_dataloader(path, rank=0, world_size=1, overrides=["--train.batch_size=3"])
    assert loader.batch_size == 3 and next(iter(loader))["input_ids"].shape[0] == 3
    built = build_dataloader(config, rank=0, world_size=1, overrides=["data.num_workers=0"])
    assert built.num_workers == 0
    with pytest.raises(ConfigError, match=r"unknown key data\.nope; \[data\] keys are"):
        build_dataloader(path, overrides=["--data.nope=1"])
    with pytest.raises(ConfigError, match=r"not KEY=VALUE"):
        load_config(path, ["--data.num_workers"])
    # The trainer's keys in KempnerForge's override list change nothing here.
    trainers = ["--train.max_steps=1000", "--optimizer.lr=1e-4", "--model.dim=512"]
    assert load_config(path, [*trainers, "--train.seed=5"]) == load_config(path, ["train.seed=5"])
    assert trainer_overrides(trainers) == ["train.max_steps", "optimizer.lr", "model.dim"]
    assert trainer_overrides(["data.num_workers=1", "train.seq_len=4"]) == []
    # A typo is still refused: a section no job file has, a near miss of the loader's keys.
    with pytest.raises(ConfigError, match=r"unknown key dat\.num_workers; sections are data"):
        load_config(path, ["--dat.num_workers=7"])
    with pytest.raises(
        ConfigError,
        match=r"unknown key train\.batchsize \(close to 'batch_size': a typo\?\); \[train\] keys",
    ):
        load_config(path, ["train.batchsize=3"])
    with pytest.raises(ConfigError, match=r"\[train\] key 'batchsize' .* close to 'batch_size'"):
        build_dataloader({"train": {"batchsize": 3}, "data": {"dataset_path": f"{root}/web"}})
    with pytest.raises(ConfigError, match=r"train\.batch_size must be >= 1"):
        build_dataloader(config, overrides=["train.batch_size=0"])


def test_an_override_value_yaml_refuses_is_taken_as_text() -> None:
    # `*.bin` is a YAML alias; a NUL is refused by YAML: the text itself goes to the typed
    # config, which takes a string and names a wrong type.
    assert load_config(None, ["data.file_pattern=*.bin"]).data.file_pattern == "*.bin"
    with pytest.raises(ConfigError, match="num_workers"):
        load_config(None, ["data.num_workers=\x00"])


def test_what_building_from_a_job_file_finds_wrong_names_the_file(tmp_path: Path) -> None:
    """The datasets' checks name the folder and key; a job may have several config files, so
    the one that set them is named too (the loader, the eval loaders and `loader-check`)."""
    empty = tmp_path / "shards"
    empty.mkdir()
    path = tmp_path / "job.toml"
    path.write_text(f'[data]\ndataset_path = "{empty}"\n')
    with pytest.raises(InputError, match=rf"^{path}: {empty}: no files match") as raised:
        build_dataloader(path, 0, 1)
    assert "dataset_path" in str(raised.value)
    evaluated = write(tmp_path / "eval.toml", f'[eval]\nenabled = true\ndataset_path = "{empty}"\n')
    with pytest.raises(InputError, match=rf"^{evaluated}: {empty}: no files match"):
        build_eval_loaders(evaluated, 0, 1)
    done = subprocess.run(
        [sys.executable, "-m", "data_io", "loader-check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and f"{path}: {empty}: no files match" in done.stderr, done.stderr
    # A config given as an object names no file.
    with pytest.raises(InputError, match=rf"^{empty}: no files match"):
        build_dataloader(load_config(path), 0, 1)


def test_an_empty_override_of_a_text_key_clears_it_as_kempnerforge_defaults_do(
    tmp_path: Path,
) -> None:
    # `--data.dataset_path=`: the key's unset value is "" (KempnerForge's defaults), not the
    # null YAML reads from nothing, which a text key refuses ("is not Optional").
    path = tmp_path / "job.toml"
    path.write_text('[data]\ndataset_path = "shards"\nhf_dataset_name = "org/ds"\n')
    config = load_config(path, ["--data.dataset_path=", "--data.tokenizer_path="])
    assert config.data.dataset_path == "" and config.data.tokenizer_path == ""
    assert config.data.hf_dataset_name == "org/ds"
    # An optional key still reads nothing as unset; a number still names its key.
    assert load_config(path, ["data.hf_dataset_config="]).data.hf_dataset_config is None
    with pytest.raises(ConfigError, match="num_workers"):
        load_config(path, ["data.num_workers="])
