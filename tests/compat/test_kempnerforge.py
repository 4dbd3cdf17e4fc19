"""KempnerForge users drop in unchanged: the seed's documented [data] block, read verbatim, its
CLI override spelling, raw .bin shards with a declared dtype, and state_dict()/load_state_dict()
on "all of the map-style datasets and samplers" (seeds/kempnerforge-data-pipeline.txt,
seeds/kempnerforge-config-sections.txt)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from data_io.errors import InputError
from data_io.load import (
    DistributedSampler,
    HuggingFaceDataset,
    MemoryMappedDataset,
    MixtureDataset,
    MixtureSampler,
    build_dataloader,
    load_config,
)
from tests.load.id_shards import write_id_source

# The seed's "Config" block (kempnerforge-data-pipeline.txt), character for character.
SEED_DATA_BLOCK = """[data]
dataset_path    = ""              # pre-tokenized shard directory
file_pattern    = "*.npy"         # glob for shard files (also "*.bin")
tokenizer_path  = ""              # HF tokenizer name or local path
num_workers     = 4
pin_memory      = true
prefetch_factor = 2
pack_sequences  = false           # cross-doc label masking via EOS

# HuggingFace path
hf_dataset_name      = ""           # default: None (str | None)
hf_dataset_config    = ""           # default: None (str | None)
hf_dataset_split     = "train"
hf_dataset_text_field = "text"
hf_streaming         = false

# Multi-dataset mixing
datasets        = []              # list of DatasetSource tables
mix_temperature = 1.0             # weight scaling (1.0 = as-is, >1 = more uniform)

# Phase scheduling (step-triggered weight + LR transitions)
phases            = []
anneal_start_step = 0             # shortcut for a common 2-phase pattern
anneal_weights    = {}
"""

TRAIN = "\n[train]\nbatch_size = 4\nseq_len = 8\nseed = 1\n"


def job(tmp_path: Path, folder: Path, extra: str = "") -> Path:
    """The seed's block with dataset_path pointed at ``folder`` (the only line changed)."""
    block = SEED_DATA_BLOCK.replace('dataset_path    = ""', f'dataset_path    = "{folder}"', 1)
    path = tmp_path / "job.toml"
    path.write_text(block + extra + TRAIN)
    return path


def test_the_seed_data_block_reads_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "seed.toml"
    path.write_text(SEED_DATA_BLOCK)
    data = load_config(path).data
    assert (data.num_workers, data.pin_memory, data.prefetch_factor) == (4, True, 2)
    assert data.file_pattern == "*.npy" and data.hf_dataset_split == "train"
    assert data.datasets == [] and data.mix_temperature == 1.0 and data.anneal_weights == {}


def test_pretokenized_npy_path_with_the_kempnerforge_override(tmp_path: Path) -> None:
    """`data.dataset_path = "..."` → MemoryMappedDataset windows: input tokens[:-1], target
    tokens[1:]; --data.num_workers=0 (KempnerForge's spelling) on loader-check and in Python."""
    folder = write_id_source(tmp_path / "shards", 0, [9 * 50, 9 * 30])
    path = job(tmp_path, folder)
    loader = build_dataloader(path, 0, 1, overrides=["--data.num_workers=0"])
    assert loader.identity["kind"] == "shards" and loader.num_workers == 0
    assert isinstance(loader.dataset, MemoryMappedDataset) and len(loader.dataset) == 80
    batch = next(iter(loader))
    starts = batch["input_ids"][:, 0]
    assert (starts % 9 == 0).all()  # whole windows of seq_len + 1 tokens
    expected = starts[:, None] + torch.arange(8)
    assert (batch["input_ids"] == expected).all() and (batch["labels"] == expected + 1).all()
    done = subprocess.run(
        [
            *(sys.executable, "-m", "data_io", "loader-check", str(path)),
            *("--data.num_workers=0", "--json", "--batches", "2", "--train.batch_size=2"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["kind"] == "shards" and report["batch_size"] == 2
    assert report["steps_per_epoch"] == 80 // 2


def test_bin_shards_need_a_dtype_and_take_it_from_data(tmp_path: Path) -> None:
    """The seed's `file_pattern = "*.bin"`: KempnerForge guesses the dtype from the file size
    (uint32 whenever it divides by 4); data_io refuses to guess and reads `data.dtype`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    tokens = np.arange(1000, 1000 + 9 * 10, dtype=np.uint16)  # 180 bytes: "uint32" by size
    tokens.tofile(folder / "shard_000.bin")
    block = 'file_pattern    = "*.npy"         # glob for shard files (also "*.bin")'
    path = job(tmp_path, folder)
    path.write_text(path.read_text().replace(block, 'file_pattern = "*.bin"'))
    with pytest.raises(InputError, match=r"never guessed.*data\.dtype"):
        build_dataloader(path, 0, 1, overrides=["--data.num_workers=0"])
    loader = build_dataloader(
        path,
        0,
        1,
        overrides=["--data.num_workers=0", "--data.dtype=uint16", "--data.shuffle=false"],
    )
    first = next(iter(loader))["input_ids"]
    assert first[0].tolist() == tokens[:8].tolist()  # read as uint16, not pairs fused as uint32


def test_mixture_sources_with_the_documented_fields(tmp_path: Path) -> None:
    web = write_id_source(tmp_path / "web", 0, [9 * 60])
    code = write_id_source(tmp_path / "code", 1, [9 * 40])
    path = job(tmp_path, Path(""))
    text = path.read_text().replace(
        "datasets        = []",
        f'datasets = [{{ path = "{web}", weight = 0.7, name = "web" }}, '
        f'{{ path = "{code}", weight = 0.3, name = "code" }}]',
    )
    path.write_text(text.replace('dataset_path    = ""', 'dataset_path = ""'))
    loader = build_dataloader(path, 0, 1, overrides=["--data.num_workers=0"])
    assert isinstance(loader.dataset, MixtureDataset) and loader.names == ["web", "code"]
    for _ in zip(range(10), loader, strict=False):
        pass
    counts = loader.token_counts()
    assert counts["web"] + counts["code"] == 10 * 4 * 8
    assert abs(counts["web"] / (10 * 4 * 8) - 0.7) <= 2 / 40  # within 2 samples of the weight


def test_every_map_style_dataset_and_sampler_is_stateful(tmp_path: Path) -> None:
    """ "All of the map-style datasets and samplers implement state_dict() / load_state_dict()",
    and a loader checkpointed through its dataset resumes where an uninterrupted run goes."""
    for kind in (MemoryMappedDataset, HuggingFaceDataset, MixtureDataset):
        assert callable(kind.state_dict) and callable(kind.load_state_dict)
    for kind in (DistributedSampler, MixtureSampler):
        assert callable(kind.state_dict) and callable(kind.load_state_dict)
    folder = write_id_source(tmp_path / "shards", 0, [9 * 64])
    path = job(tmp_path, folder)
    overrides = ["--data.num_workers=0"]
    whole = [
        b["input_ids"][:, 0].tolist() for b in build_dataloader(path, 0, 1, overrides=overrides)
    ]
    loader = build_dataloader(path, 0, 1, overrides=overrides)
    first = [b["input_ids"][:, 0].tolist() for _, b in zip(range(6), loader, strict=False)]
    checkpoint = json.loads(json.dumps({"train_dataset": loader.dataset.state_dict()}))
    resumed = build_dataloader(path, 0, 1, overrides=overrides)
    resumed.dataset.load_state_dict(checkpoint["train_dataset"])
    assert first + [b["input_ids"][:, 0].tolist() for b in resumed] == whole
