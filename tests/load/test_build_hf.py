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


@pytest.mark.parametrize("stop", [1, 3])
def test_streaming_resume_with_workers_keeps_the_batch_order(
    texts: Path, small_tokenizer: Path, stop: int
) -> None:
    # torch restarts its round-robin at worker 0; the loader rotates the workers' streams so
    # that the batch that comes next is the one an uninterrupted run would have yielded.
    options = ("data.hf_streaming=true", "data.num_workers=2")
    reference = ids(build_dataloader(config(texts, small_tokenizer, *options), 0, 1))
    stopped = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    assert ids(b for _, b in zip(range(stop), stopped, strict=False)) == reference[:stop]
    resumed = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    resumed.load_state_dict(json.loads(json.dumps(stopped.state_dict())))
    assert ids(resumed) == reference[stop:]


def test_streaming_states_of_all_ranks_merge_for_another_topology(
    texts: Path, small_tokenizer: Path
) -> None:
    from data_io.errors import ConfigError
    from data_io.load import StatefulLoader

    options = ("data.hf_streaming=true", "data.num_workers=0")
    ranks = [build_dataloader(config(texts, small_tokenizer, *options), r, 2) for r in range(2)]
    for loader in ranks:
        for _, _batch in zip(range(3), loader, strict=False):
            pass
    states = [json.loads(json.dumps(loader.state_dict())) for loader in ranks]
    single = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    with pytest.raises(ConfigError, match="merge every rank's state"):
        single.load_state_dict(states[0])
    other_rank = build_dataloader(config(texts, small_tokenizer, *options), 0, 2)
    with pytest.raises(ConfigError, match="rank 1's"):
        other_rank.load_state_dict(states[1])
    with pytest.raises(ConfigError, match="one state per rank"):
        StatefulLoader.merge_states(states[:1])
    merged = StatefulLoader.merge_states(states)
    single.load_state_dict(merged)
    # Both old streams had read rows; the new single stream starts at the smallest unfinished
    # row: it sees every row from there on and skips none before it.
    rows = sorted(int(r) for r, _ in merged["state"]["streams"].values())
    resumed = list(single)
    assert resumed and rows[0] > 0
    full = ids(build_dataloader(config(texts, small_tokenizer, *options), 0, 1))
    assert len(ids(resumed)) < len(full)


@pytest.mark.parametrize("workers", [0, 2])
def test_streaming_state_saved_before_the_first_batch_resumes(
    texts: Path, small_tokenizer: Path, workers: int
) -> None:
    # Before: the state of a loader that had handed out no batch yet (a checkpoint at step 0)
    # was {} and its load failed with "not a streaming loader state (no streams)".
    from data_io.load import StatefulLoader

    options = ("data.hf_streaming=true", f"data.num_workers={workers}")
    reference = ids(build_dataloader(config(texts, small_tokenizer, *options), 0, 1))
    fresh = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    resumed = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    resumed.load_state_dict(json.loads(json.dumps(fresh.state_dict())))
    assert ids(resumed) == reference
    # Every rank's step-0 state merges, for a resume with another topology.
    ranks = [build_dataloader(config(texts, small_tokenizer, *options), r, 2) for r in range(2)]
    merged = StatefulLoader.merge_states([json.loads(json.dumps(r.state_dict())) for r in ranks])
    single = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    single.load_state_dict(merged)
    assert ids(single) == reference
    # Such a state written by the version before (its inner state {}): the start too.
    old = json.loads(json.dumps(fresh.state_dict()))
    old["state"] = {}
    again = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    again.load_state_dict(old)
    assert ids(again) == reference


@pytest.mark.parametrize("workers", [0, 2])
def test_streaming_epochs_after_a_resume_are_whole(
    texts: Path, small_tokenizer: Path, workers: int
) -> None:
    # Before: the epoch after a resumed one started again at the resume point (its first
    # batches silently lost), and a state saved in a later epoch kept the earlier epoch's
    # streams and batch count (the resumed batches came from the wrong workers).
    options = ("data.hf_streaming=true", f"data.num_workers={workers}")
    reference = ids(build_dataloader(config(texts, small_tokenizer, *options), 0, 1))
    stopped = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    assert ids(b for _, b in zip(range(3), stopped, strict=False)) == reference[:3]
    resumed = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    resumed.load_state_dict(json.loads(json.dumps(stopped.state_dict())))
    assert ids(resumed) == reference[3:]
    assert ids(resumed) == reference  # the next epoch, from every stream's start
    # A state saved in the second epoch resumes that epoch's rest.
    uninterrupted = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    assert ids(uninterrupted) == reference
    assert ids(b for _, b in zip(range(3), uninterrupted, strict=False)) == reference[:3]
    again = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    again.load_state_dict(json.loads(json.dumps(uninterrupted.state_dict())))
    assert ids(again) == reference[3:]


def test_streaming_state_after_the_last_batch_resumes_into_the_next_epoch(
    texts: Path, small_tokenizer: Path
) -> None:
    # As a map-style loader's: a state saved after the epoch's last batch starts the next
    # epoch (before, the resumed loader yielded nothing, and then the same nothing forever).
    options = ("data.hf_streaming=true", "data.num_workers=2")
    reference = ids(build_dataloader(config(texts, small_tokenizer, *options), 0, 1))
    stopped = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    batches = iter(stopped)
    assert ids(next(batches) for _ in reference) == reference
    resumed = build_dataloader(config(texts, small_tokenizer, *options), 0, 1)
    resumed.load_state_dict(json.loads(json.dumps(stopped.state_dict())))
    assert ids(resumed) == reference
    assert ids(resumed) == reference


@pytest.mark.parametrize("workers", [0, 2])
def test_streaming_state_saved_after_a_merged_resume_resumes(
    texts: Path, small_tokenizer: Path, workers: int
) -> None:
    # Before: after a merged state was loaded, the loader kept the old topology's streams in
    # its state, and the next state it saved was refused ("row 9 does not belong to stream 1
    # of 3 ... the state is damaged").
    from data_io.load import StatefulLoader

    old = ("data.hf_streaming=true", "data.num_workers=0")
    ranks = [build_dataloader(config(texts, small_tokenizer, *old), r, 2) for r in range(2)]
    for loader in ranks:
        for _, _batch in zip(range(3), loader, strict=False):
            pass
    merged = StatefulLoader.merge_states([json.loads(json.dumps(r.state_dict())) for r in ranks])
    new = ("data.hf_streaming=true", f"data.num_workers={workers}")
    for rank in range(3):
        uninterrupted = build_dataloader(config(texts, small_tokenizer, *new), rank, 3)
        uninterrupted.load_state_dict(merged)
        reference = ids(uninterrupted)
        assert reference
        stopped = build_dataloader(config(texts, small_tokenizer, *new), rank, 3)
        stopped.load_state_dict(merged)
        assert ids(b for _, b in zip(range(1), stopped, strict=False)) == reference[:1]
        state = json.loads(json.dumps(stopped.state_dict()))
        total = 3 * max(workers, 1)
        assert all(int(g) // max(workers, 1) == rank for g in state["state"]["streams"])
        assert all(row % total == int(g) for g, (row, _) in state["state"]["streams"].items())
        resumed = build_dataloader(config(texts, small_tokenizer, *new), rank, 3)
        resumed.load_state_dict(state)
        assert ids(resumed) == reference[1:]


def test_a_rank_whose_streams_hold_no_batch_is_an_error(
    tmp_path: Path, small_tokenizer: Path
) -> None:
    # Before: with fewer rows than ranks x workers the rank without rows ended every epoch at
    # once, silently, while the other ranks trained.
    from data_io.errors import InputError

    docs = tmp_path / "three.jsonl"
    rows = [{"text": f"document {i}: " + "the quick brown fox " * 20} for i in range(3)]
    docs.write_text("".join(json.dumps(x) + "\n" for x in rows))
    options = ("data.hf_streaming=true", "data.num_workers=2")
    assert ids(build_dataloader(config(docs, small_tokenizer, *options), 0, 3))
    with pytest.raises(InputError, match=r"rank 2 of 3: its 2 stream\(s\) \(of 6 .*num_workers"):
        list(build_dataloader(config(docs, small_tokenizer, *options), 2, 3))
    empty = tmp_path / "empty_texts.jsonl"
    empty.write_text('{"text": ""}\n' * 4)  # 4 EOS tokens: no window of 17
    with pytest.raises(InputError, match="rank 0 of 1: its 1 stream"):
        list(build_dataloader(config(empty, small_tokenizer, "data.hf_streaming=true"), 0, 1))
