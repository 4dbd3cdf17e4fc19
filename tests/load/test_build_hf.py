"""HF text sources through the config and the StatefulLoader: eager and streaming, with resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_io.load import build_dataloader, load_config


@pytest.fixture()
def texts(tmp_path: Path) -> Path:
    path = tmp_path / "docs.jsonl"
    lines = [
        {"text": f"document {i}: " + " ".join(["the quick brown fox"] * (i % 7 + 1))}
        for i in range(120)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def config(texts: Path, tokenizer: Path, *extra: str):
    return load_config(
        None,
        [
            f"data.hf_dataset_name={texts}",
            f"data.tokenizer_path={tokenizer}",
            f"data.cache_dir={texts.parent / 'cache'}",
            "data.num_workers=0",
            "train.seq_len=16",
            "train.batch_size=2",
            *extra,
        ],
    )


def ids(batches) -> list[list[int]]:
    return [b["input_ids"].tolist() for b in batches]


def test_eager_source_is_cached_and_resumes(texts: Path, small_tokenizer: Path) -> None:
    loader = build_dataloader(config(texts, small_tokenizer), 0, 1)
    reference = ids(loader)
    assert len(reference) == len(loader.dataset) // 2 and len(reference) > 5
    assert (texts.parent / "cache").is_dir()
    stopped = build_dataloader(config(texts, small_tokenizer), 0, 1)
    head = [b for _, b in zip(range(3), stopped, strict=False)]
    assert ids(head) == reference[:3]
    resumed = build_dataloader(config(texts, small_tokenizer, "data.num_workers=2"), 0, 1)
    resumed.load_state_dict(json.loads(json.dumps(stopped.state_dict())))
    assert ids(resumed) == reference[3:]


@pytest.mark.parametrize("workers", [0, 2])
def test_streaming_source_resumes_through_the_loader(
    texts: Path, small_tokenizer: Path, workers: int
) -> None:
    options = ("data.hf_streaming=true", f"data.num_workers={workers}")
    reference = ids(build_dataloader(config(texts, small_tokenizer, *options), 0, 1))
    assert len(reference) > 6
    stopped = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    head = [b for _, b in zip(range(4), stopped, strict=False)]
    assert ids(head) == reference[:4]
    assert "stream_id" not in head[0]  # the loader keeps the stream bookkeeping to itself
    state = json.loads(json.dumps(stopped.state_dict()))
    resumed = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    resumed.load_state_dict(state)
    assert ids(resumed) == reference[4:]


def test_hf_source_needs_a_tokenizer(texts: Path) -> None:
    from data_io.errors import ConfigError

    with pytest.raises(ConfigError, match="tokenizer_path"):
        build_dataloader(load_config(None, [f"data.hf_dataset_name={texts}"]), 0, 1)
