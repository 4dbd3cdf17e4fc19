"""HF text sources: the source resolver, HuggingFaceDataset (eager, cached shards) and
StreamingHuggingFaceDataset (sharded over ranks and workers, resumable).

Every window is compared with an independent re-derivation: the Python ``tokenizers`` package
encodes each document, EOS is appended by hand, and windows are cut with plain slicing.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.utils.data import DataLoader

from data_io.errors import ConfigError, InputError
from data_io.load.datasets import hf_text
from data_io.load.datasets.hf_text import (
    STREAM_KEYS,
    HuggingFaceDataset,
    StreamingHuggingFaceDataset,
    resolve_text_source,
)
from data_io.load.datasets.shards import pack_window
from tests.conftest import logged_by_datasets

SEQ_LEN = 17
EOS_TOKEN = "<|endoftext|>"


def make_texts(n: int, tag: str = "doc") -> list[str]:
    """Documents of varied length, with unicode, empty texts and a literal special string."""
    extras = ["", "naïve café 日本語 🙂", "<|endoftext|> is text here", "line\nbreak\ttab"]
    return [f"{tag} {i} " + "word " * (i % 11) + extras[i % len(extras)] for i in range(n)]


TEXTS = make_texts(120)


# -- the independent oracle -------------------------------------------------------------------
def oracle_docs(tokenizer: Path, texts: list[str]) -> list[list[int]]:
    """Each text's ids by the Python tokenizers package (special strings as text) + EOS."""
    tok = Tokenizer.from_file(str(tokenizer))
    tok.encode_special_tokens = True
    eos = tok.token_to_id(EOS_TOKEN)
    return [[*tok.encode(text, add_special_tokens=False).ids, eos] for text in texts]


def windows_of(docs: list[list[int]], seq_len: int = SEQ_LEN) -> list[list[int]]:
    flat = [token for doc in docs for token in doc]
    return [flat[i : i + seq_len] for i in range(0, len(flat) - seq_len + 1, seq_len)]


def plain_item(window: list[int]) -> dict[str, list[int]]:
    return {"input_ids": window[:-1], "labels": window[1:]}


# -- writers of local data --------------------------------------------------------------------
def write_jsonl(path: Path, texts: list[str], field: str = "text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({field: t, "id": i}, ensure_ascii=False) for i, t in enumerate(texts)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_parquet(path: Path, texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": list(range(len(texts))), "text": texts}), path)
    return path


def write_saved(folder: Path, texts: list[str], split: str | None = None) -> Path:
    import datasets

    data = datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))})
    if split is not None:
        other = datasets.Dataset.from_dict({"text": ["other split"], "n": [0]})
        data = datasets.DatasetDict({split: data, "unused": other})
    data.save_to_disk(str(folder))
    return folder


def write_hf_download(folder: Path, train: list[str], test: list[str]) -> Path:
    """What `hf download ORG/NAME --repo-type dataset --local-dir DIR` leaves: the repo's data
    files by split name, a README, and the download bookkeeping under .cache/."""
    write_parquet(folder / "data" / "train-00000-of-00001.parquet", train)
    write_parquet(folder / "data" / "test-00000-of-00001.parquet", test)
    (folder / "README.md").write_text("# a dataset\n")
    meta = folder / ".cache" / "huggingface" / "download" / "data"
    meta.mkdir(parents=True)
    (meta / "train-00000-of-00001.parquet.metadata").write_text("abc\n123\n")
    return folder


def eager(name: str, seq_len: int, tokenizer: Path, **kwargs: Any) -> HuggingFaceDataset:
    """The eager dataset with the oracle's EOS unless a test names another."""
    kwargs.setdefault("eos_token_id", EOS_TOKEN)
    return HuggingFaceDataset(name, seq_len, tokenizer, **kwargs)


def items(dataset: Any) -> list[dict[str, list[int]]]:
    keys = ("input_ids", "labels")
    return [{k: dataset[i][k].tolist() for k in keys} for i in range(len(dataset))]


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    return tmp_path / "cache"


# -- resolver -----------------------------------------------------------------------------------
def test_resolver_kinds(tmp_path: Path) -> None:
    jsonl = write_jsonl(tmp_path / "a.jsonl", ["x"])
    assert resolve_text_source(jsonl, "train", None).kind == "files"
    assert resolve_text_source(write_saved(tmp_path / "saved", ["x"]), "train", None).kind == (
        "saved"
    )
    folder = write_hf_download(tmp_path / "dl", ["x"], ["y"])
    source = resolve_text_source(folder, "train", None)
    assert source.kind == "folder"
    # The .cache bookkeeping is not data and does not change the identity.
    assert all(".cache" not in p.parts for p in source.files)
    assert resolve_text_source("org/name", "train", "en").kind == "hub"


@pytest.mark.parametrize(
    ("name", "error", "match"),
    [
        ("./missing.jsonl", InputError, "does not exist"),
        ("/no/such/folder", InputError, "does not exist"),
        ("data.parquet", InputError, "does not exist"),
        ("not a hub id!", ConfigError, "neither a local file"),
        # Quoted on the command line, the shell left it as it was (MyPT's --input_files).
        ("data/*.txt", InputError, r"'data/\*\.txt' looks like a pattern: .*\(leave it unquoted\)"),
        ("shard_[0-9].parquet", InputError, "looks like a pattern"),
    ],
)
def test_resolver_bad_names(name: str, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        resolve_text_source(name, "train", None)


def test_resolver_bad_files_and_options(tmp_path: Path) -> None:
    odd = tmp_path / "notes.docx"
    odd.write_text("x")
    with pytest.raises(InputError, match=r"notes\.docx.*\.jsonl, \.json, \.parquet"):
        resolve_text_source(odd, "train", None)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no files"):
        resolve_text_source(tmp_path / "empty", "train", None)
    with pytest.raises(ConfigError, match="split"):
        resolve_text_source("org/name", "", None)
    with pytest.raises(ConfigError, match="dataset_config"):
        resolve_text_source("org/name", "train", "")
    jsonl = write_jsonl(tmp_path / "a.jsonl", ["x"])
    with pytest.raises(ConfigError, match="dataset_config 'en' applies to Hub datasets"):
        resolve_text_source(jsonl, "train", "en")
    saved = write_saved(tmp_path / "saved", ["x"])
    with pytest.raises(ConfigError, match="a save_to_disk folder has none"):
        resolve_text_source(saved, "train", "en")


def test_offline_hub_says_how_to_use_a_local_copy(
    monkeypatch: pytest.MonkeyPatch, small_tokenizer: Path, cache: Path
) -> None:
    import datasets
    import huggingface_hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # Both libraries read the variable at import: set their copies too.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    name = "data-io-tests/no-such-dataset"
    with pytest.raises(InputError) as caught:
        eager(name, SEQ_LEN, small_tokenizer, cache_dir=cache)
    message = str(caught.value)
    assert name in message and "could not be reached" in message
    assert f"hf download {name} --repo-type dataset --local-dir DIR" in message
    stream = StreamingHuggingFaceDataset(name, SEQ_LEN, small_tokenizer)  # default EOS
    with pytest.raises(InputError, match="hf download"):
        next(iter(stream))


def test_hub_id_fails_at_once_when_the_hub_does_not_answer(
    monkeypatch: pytest.MonkeyPatch, small_tokenizer: Path, cache: Path
) -> None:
    from data_io.util import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "_probe", lambda url: f"{url} does not answer")
    name = "data-io-tests/no-such-dataset"
    with pytest.raises(InputError, match="Hub is not reachable") as caught:
        eager(name, SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert "HF_HUB_OFFLINE=1" in str(caught.value)
    with pytest.raises(InputError, match="Hub is not reachable"):
        next(iter(StreamingHuggingFaceDataset(name, SEQ_LEN, small_tokenizer)))


# -- eager --------------------------------------------------------------------------------------
def test_eager_windows_match_the_oracle(small_tokenizer: Path, tmp_path: Path, cache: Path):
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    dataset = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    expected = windows_of(oracle_docs(small_tokenizer, TEXTS))
    assert items(dataset) == [plain_item(w) for w in expected]
    shard = np.load(next(dataset.cache_folder.glob("*.npy")))
    assert shard.dtype == np.uint16  # the 600-token vocabulary fits
    summary = dataset.summary()
    json.dumps(summary)
    assert summary["rows"] == len(TEXTS) and summary["windows"] == len(expected)
    assert summary["tokens"] == sum(map(len, oracle_docs(small_tokenizer, TEXTS)))
    assert summary["cache_reused"] is False


@pytest.mark.parametrize("layout", ["parquet", "saved", "saved_dict", "hf_download", "csv", "txt"])
def test_eager_reads_every_local_layout(
    layout: str, small_tokenizer: Path, tmp_path: Path, cache: Path
) -> None:
    texts = [t.replace("\n", " ") for t in TEXTS[:50]]  # a .txt row is one line
    split = "train"
    if layout == "parquet":
        name = write_parquet(tmp_path / "d.parquet", texts)
    elif layout == "saved":
        name = write_saved(tmp_path / "saved", texts)
    elif layout == "saved_dict":
        name, split = write_saved(tmp_path / "saved", texts, split="validation"), "validation"
    elif layout == "hf_download":
        name, split = write_hf_download(tmp_path / "dl", ["train text"] * 3, texts), "test"
    elif layout == "csv":
        name = tmp_path / "d.csv"
        import pyarrow.csv as pacsv

        pacsv.write_csv(pa.table({"text": texts}), name)
    else:
        name = tmp_path / "d.txt"
        name.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    dataset = eager(str(name), SEQ_LEN, small_tokenizer, split=split, cache_dir=cache)
    expected = windows_of(oracle_docs(small_tokenizer, texts))
    assert items(dataset) == [plain_item(w) for w in expected]


def test_eager_cache_is_reused_and_invalidated(
    small_tokenizer: Path, tmp_path: Path, cache: Path
) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    first = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    shard = next(first.cache_folder.glob("*.npy"))
    written = shard.stat().st_mtime_ns
    again = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert again.reused and again.cache_folder == first.cache_folder
    assert shard.stat().st_mtime_ns == written  # not re-written
    assert again.fingerprint() == first.fingerprint()
    # Another window length: same shards, another fingerprint (the items differ).
    longer = eager(str(data), SEQ_LEN + 4, small_tokenizer, cache_dir=cache)
    assert longer.reused and longer.fingerprint() != first.fingerprint()
    # Another EOS or text field: another cache.
    other_eos = HuggingFaceDataset(
        str(data), SEQ_LEN, small_tokenizer, eos_token_id="<|im_end|>", cache_dir=cache
    )
    assert not other_eos.reused and other_eos.cache_folder != first.cache_folder
    # The input changes: re-tokenized into a new folder, with the new row.
    changed = [*TEXTS, "a brand new document at the end"]
    write_jsonl(data, changed)
    os.utime(data, ns=(written + 10**9, written + 10**9))
    fresh = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert not fresh.reused and fresh.cache_folder != first.cache_folder
    assert fresh.fingerprint() != first.fingerprint()
    assert items(fresh) == [
        plain_item(w) for w in windows_of(oracle_docs(small_tokenizer, changed))
    ]
    # No temporary folder is left behind.
    assert not [p for p in cache.iterdir() if ".tmp-" in p.name]


def test_eager_cache_follows_the_tokenizer(small_tokenizer: Path, tmp_path: Path, cache: Path):
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    copy = tmp_path / "tok" / "tokenizer.json"
    copy.parent.mkdir()
    shutil.copy(small_tokenizer, copy)
    first = eager(str(data), SEQ_LEN, copy, cache_dir=cache)
    # Same file content elsewhere: the key is the content hash, so the cache is reused.
    assert eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache).reused
    config = json.loads(copy.read_text())
    config["added_tokens"].append(
        {"id": 600, "content": "<new>", "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": True}
    )  # fmt: skip
    copy.write_text(json.dumps(config))
    second = eager(str(data), SEQ_LEN, copy, cache_dir=cache)
    assert not second.reused and second.cache_folder != first.cache_folder


def test_damaged_cache_is_rebuilt(small_tokenizer: Path, tmp_path: Path, cache: Path) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    first = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    expected = items(first)
    shard = next(first.cache_folder.glob("*.npy"))
    shard.write_bytes(shard.read_bytes()[:100])  # truncated by a crash or a full disk
    rebuilt = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert not rebuilt.reused and items(rebuilt) == expected


def test_large_vocabulary_is_stored_as_uint32(tmp_path: Path, cache: Path) -> None:
    vocab = {f"w{i}": i for i in range(70_000)}
    vocab[EOS_TOKEN] = 70_000
    tok = Tokenizer(models.WordLevel(vocab, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = tmp_path / "big.json"
    tok.save(str(path))
    texts = [
        " ".join(f"w{(i * 7919 + k * 104729) % 70_000}" for k in range(i % 9)) for i in range(60)
    ]
    data = write_jsonl(tmp_path / "d.jsonl", texts)
    dataset = eager(str(data), SEQ_LEN, path, cache_dir=cache)
    assert np.load(next(dataset.cache_folder.glob("*.npy"))).dtype == np.uint32
    assert items(dataset) == [plain_item(w) for w in windows_of(oracle_docs(path, texts))]
    assert max(max(i["input_ids"]) for i in items(dataset)) > 65_535


def test_eager_packing_options(small_tokenizer: Path, tmp_path: Path, cache: Path) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    dataset = eager(
        str(data), SEQ_LEN, small_tokenizer, pack_sequences=True, position_ids=True,
        cu_seqlens=True, cache_dir=cache,
    )  # fmt: skip
    eos = Tokenizer.from_file(str(small_tokenizer)).token_to_id(EOS_TOKEN)
    for i, window in enumerate(windows_of(oracle_docs(small_tokenizer, TEXTS))):
        want = pack_window(np.array(window), eos, position_ids=True, cu_seqlens=True)
        got = dataset[i]
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_eager_pickles_small_and_loads_in_workers(
    small_tokenizer: Path, tmp_path: Path, cache: Path
) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    dataset = eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert len(pickle.dumps(dataset)) < 10_000
    loader = DataLoader(dataset, batch_size=4, num_workers=2)
    got = torch.cat([b["input_ids"] for b in loader]).tolist()
    assert got == [w[:-1] for w in windows_of(oracle_docs(small_tokenizer, TEXTS))]


def test_eager_bad_rows_name_row_and_field(
    small_tokenizer: Path, tmp_path: Path, cache: Path
) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS, field="body")
    with pytest.raises(InputError, match=r"no field 'text' \(the rows have body, id\)"):
        eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    rows = [{"text": "fine"}, {"text": "also fine"}, {"text": 42}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InputError, match=r"row 2 \(counted from 0\) has a number in field 'text'"):
        eager(str(bad), SEQ_LEN, small_tokenizer, cache_dir=cache)
    saved = tmp_path / "saved_nulls"
    import datasets

    texts: list[str | None] = ["a", "b", None, "d"]
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(saved))
    with pytest.raises(InputError, match=r"row 2 \(counted from 0\) has no text in field 'text'"):
        eager(str(saved), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert not cache.exists() or not list(cache.iterdir())  # nothing half-written is kept


def test_eager_bad_input_and_options(small_tokenizer: Path, tmp_path: Path, cache: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(InputError, match=r"empty\.jsonl.* holds no rows"):
        eager(str(empty), SEQ_LEN, small_tokenizer, cache_dir=cache)
    with pytest.raises(InputError, match="holds no rows"):
        list(streaming(empty, small_tokenizer))
    # A saved dataset of no rows, which datasets' own load_from_disk fails on (IndexError).
    import datasets as hf

    saved_empty = tmp_path / "saved_empty"
    hf.Dataset.from_dict({"text": []}).save_to_disk(str(saved_empty))
    with pytest.raises(InputError, match=r"saved_empty.*: holds no rows"):
        eager(str(saved_empty), SEQ_LEN, small_tokenizer, cache_dir=cache)
    saved_dict = tmp_path / "saved_dict"
    hf.DatasetDict({"train": hf.Dataset.from_dict({"text": []})}).save_to_disk(str(saved_dict))
    with pytest.raises(InputError, match=r"saved_dict.*: holds no rows"):
        list(streaming(saved_dict, small_tokenizer))
    import datasets

    no_rows = tmp_path / "no_rows"
    datasets.Dataset.from_dict({"text": []}).save_to_disk(str(no_rows))
    # datasets itself cannot open a saved dataset of zero rows: still an InputError naming it.
    with pytest.raises(InputError, match=r"'.*no_rows' split 'train'"):
        eager(str(no_rows), SEQ_LEN, small_tokenizer, cache_dir=cache)
    with pytest.raises(InputError, match=r"'.*no_rows' split 'train'"):
        list(streaming(no_rows, small_tokenizer))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok"}\n{"text": oops\n')
    with (
        logged_by_datasets() as logged,
        pytest.raises(InputError, match=r"cannot read .*broken\.jsonl .*JSON parse error"),
    ):
        eager(str(broken), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert logged == []  # said once, in the error
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS[:3])
    with pytest.raises(ConfigError, match="seq_len"):
        eager(str(data), 1, small_tokenizer, cache_dir=cache)
    with pytest.raises(ConfigError, match="pack_sequences=True"):
        eager(str(data), SEQ_LEN, small_tokenizer, position_ids=True)
    with pytest.raises(ConfigError, match="not in the vocabulary"):
        eager(str(data), SEQ_LEN, small_tokenizer, eos_token_id="<|eos|>")
    with pytest.raises(ConfigError, match="text_field"):
        eager(str(data), SEQ_LEN, small_tokenizer, text_field="")
    with pytest.raises(ConfigError, match="longer than every shard"):
        eager(str(data), 10_000, small_tokenizer, cache_dir=cache)
    with pytest.raises(InputError, match="no split 'test'"):
        eager(
            str(write_saved(tmp_path / "s", ["x"], split="train")), SEQ_LEN, small_tokenizer,
            split="test", cache_dir=cache,
        )  # fmt: skip


# -- streaming ----------------------------------------------------------------------------------
def stream_oracle(tokenizer: Path, texts: list[str], total: int, stream: int, first_row=None):
    """Windows of stream ``stream`` of ``total``: the rows i % total == stream from first_row."""
    start = stream if first_row is None else first_row
    rows = [texts[i] for i in range(start, len(texts)) if i % total == stream]
    return windows_of(oracle_docs(tokenizer, rows))


def collect(dataset: StreamingHuggingFaceDataset, workers: int) -> list[dict[str, torch.Tensor]]:
    return list(DataLoader(dataset, batch_size=2, num_workers=workers))


def per_stream(batches: list[dict[str, torch.Tensor]]) -> dict[int, list[list[int]]]:
    """Each stream's windows (input + last label = the raw window), in the order yielded."""
    out: dict[int, list[list[int]]] = defaultdict(list)
    for batch in batches:
        for k in range(len(batch["stream_id"])):
            window = [*batch["input_ids"][k].tolist(), int(batch["labels"][k][-1])]
            out[int(batch["stream_id"][k])].append(window)
    return dict(out)


def recorded_state(batches: list[dict[str, torch.Tensor]], total: int) -> dict[str, Any]:
    """What a loader records: per stream, the resume point of the last sample consumed."""
    streams = {}
    for batch in batches:
        for k in range(len(batch["stream_id"])):
            row, offset = int(batch["stream_row"][k]), int(batch["stream_offset"][k])
            streams[int(batch["stream_id"][k])] = [row, offset]
    return {"num_streams": total, "streams": streams}


def streaming(data: Path, tokenizer: Path, **kwargs: Any) -> StreamingHuggingFaceDataset:
    kwargs.setdefault("eos_token_id", EOS_TOKEN)
    return StreamingHuggingFaceDataset(str(data), SEQ_LEN, tokenizer, **kwargs)


def test_single_stream_matches_the_oracle(small_tokenizer: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    batches = collect(streaming(data, small_tokenizer), workers=0)
    assert per_stream(batches) == {0: windows_of(oracle_docs(small_tokenizer, TEXTS))}
    assert set(batches[0]) == {"input_ids", "labels", *STREAM_KEYS}
    assert batches[0]["stream_row"].dtype == torch.int64


@pytest.mark.parametrize(("world_size", "workers"), [(1, 3), (2, 1), (2, 3)])
def test_streams_partition_the_rows(
    world_size: int, workers: int, small_tokenizer: Path, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    total = world_size * workers
    seen: dict[int, list[list[int]]] = {}
    for rank in range(world_size):
        dataset = streaming(data, small_tokenizer, rank=rank, world_size=world_size)
        got = per_stream(collect(dataset, workers))
        assert set(got) <= set(range(rank * workers, (rank + 1) * workers))
        seen.update(got)
    # Each stream reads exactly its rows i % G == g: no row twice, every row once (only each
    # stream's last partial window is dropped).
    for stream in range(total):
        assert seen.get(stream, []) == stream_oracle(small_tokenizer, TEXTS, total, stream)
    used = sum(len(w) for windows in seen.values() for w in windows)
    all_tokens = sum(map(len, oracle_docs(small_tokenizer, TEXTS)))
    assert all_tokens - total * SEQ_LEN < used <= all_tokens


@pytest.mark.parametrize("workers", [0, 1, 3])
@pytest.mark.parametrize("stop", [1, 4, 7])
def test_exact_resume_with_the_same_topology(
    workers: int, stop: int, small_tokenizer: Path, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    total = max(workers, 1)
    full = collect(streaming(data, small_tokenizer), workers)
    consumed = full[:stop]
    resumed_dataset = streaming(data, small_tokenizer)
    state = recorded_state(consumed, total)
    resumed_dataset.load_state_dict(json.loads(json.dumps(state)))  # as saved in a checkpoint
    assert resumed_dataset.state_dict()["num_streams"] == total
    resumed = per_stream(collect(resumed_dataset, workers))
    before, after = per_stream(consumed), per_stream(full)
    for stream, windows in after.items():
        done = len(before.get(stream, []))
        assert resumed.get(stream, []) == windows[done:], f"stream {stream}"


def test_resume_with_another_topology_skips_no_row(small_tokenizer: Path, tmp_path: Path):
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    consumed = collect(streaming(data, small_tokenizer), workers=2)[:5]
    state = {**recorded_state(consumed, 2), "complete": True}  # every stream's entry
    low = min(row for row, _ in state["streams"].values())
    assert low > 0
    for rank in range(3):  # now 3 ranks x 0 workers = 3 streams
        dataset = streaming(data, small_tokenizer, rank=rank, world_size=3)
        dataset.load_state_dict(state)
        given = dataset.state_dict()
        assert {k: given[k] for k in state} == state  # the resume point it was given
        got = per_stream(collect(dataset, workers=0))
        first = low + (rank - low) % 3
        assert got[rank] == stream_oracle(small_tokenizer, TEXTS, 3, rank, first_row=first)
    # No row is skipped: old stream h had finished its rows below its recorded row, and the
    # new streams read every row from the smallest recorded one on.
    finished = {
        i for h, (row, _) in state["streams"].items() for i in range(row) if i % 2 == int(h)
    }
    assert finished | set(range(low, len(TEXTS))) == set(range(len(TEXTS)))


def test_resume_state_with_a_missing_stream_restarts_it(small_tokenizer: Path, tmp_path: Path):
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    dataset = streaming(data, small_tokenizer, world_size=2, rank=1)
    dataset.load_state_dict({"num_streams": 2, "streams": {"0": [40, 0]}})
    assert per_stream(collect(dataset, 0))[1] == stream_oracle(small_tokenizer, TEXTS, 2, 1)
    # Another topology needs every stream's entry (one rank's state is not enough) ...
    three = streaming(data, small_tokenizer, world_size=3)
    three.load_state_dict({"num_streams": 2, "streams": {"0": [40, 0]}})
    with pytest.raises(ConfigError, match="merge every rank's state"):
        collect(three, 0)
    # ... and with it, a stream that had read nothing (stream 1: rows 1, 3, ...) is resumed
    # from its first row, stream 0 having finished rows 0..38: rows from 1 on are read again.
    three.load_state_dict({"num_streams": 2, "streams": {"0": [40, 0]}, "complete": True})
    first = 1 + (0 - 1) % 3
    assert per_stream(collect(three, 0))[0] == stream_oracle(
        small_tokenizer, TEXTS, 3, 0, first_row=first
    )


def test_streaming_packing(small_tokenizer: Path, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    dataset = streaming(data, small_tokenizer, pack_sequences=True, cu_seqlens=True)
    eos = Tokenizer.from_file(str(small_tokenizer)).token_to_id(EOS_TOKEN)
    samples = list(dataset)
    windows = windows_of(oracle_docs(small_tokenizer, TEXTS))
    assert len(samples) == len(windows)
    for sample, window in zip(samples, windows, strict=True):
        want = pack_window(np.array(window), eos, cu_seqlens=True)
        assert all(torch.equal(sample[k], want[k]) for k in want)


@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"num_streams": 0, "streams": {}}, "num_streams"),
        ({"num_streams": 2, "streams": {"5": [5, 0]}}, "outside 0..1"),
        ({"num_streams": 2, "streams": {"x": [0, 0]}}, "not an integer"),
        ({"num_streams": 2, "streams": {"1": [4, 0]}}, "does not belong to stream 1"),
        ({"num_streams": 2, "streams": {"1": [3]}}, r"\[row, offset\]"),
        ({"num_streams": 2, "streams": {"1": [3, -1]}}, "offset"),
        ({"streams": {"1": [3, 0]}}, "without 'num_streams'"),
        ({"num_streams": 2, "step": 3}, "state_dict"),
        ({"num_streams": 2, "streams": {}, "fingerprint": "abc"}, "another dataset"),
    ],
)
def test_bad_resume_states(state: dict, match: str, small_tokenizer: Path, tmp_path: Path):
    dataset = streaming(write_jsonl(tmp_path / "d.jsonl", TEXTS[:5]), small_tokenizer)
    with pytest.raises(ConfigError, match=match):
        dataset.load_state_dict(state)


def test_resume_into_changed_data_is_an_error(small_tokenizer: Path, tmp_path: Path) -> None:
    dataset = streaming(write_jsonl(tmp_path / "d.jsonl", TEXTS), small_tokenizer)
    dataset.load_state_dict({"num_streams": 1, "streams": {"0": [3, 10_000]}})
    with pytest.raises(InputError, match="skips 10000 tokens of row 3"):
        list(dataset)


def test_fingerprint_ignores_topology_but_not_options(small_tokenizer: Path, tmp_path: Path):
    data = write_jsonl(tmp_path / "d.jsonl", TEXTS)
    base = streaming(data, small_tokenizer).fingerprint()
    assert streaming(data, small_tokenizer, rank=1, world_size=4).fingerprint() == base
    assert streaming(data, small_tokenizer, pack_sequences=True).fingerprint() != base
    assert streaming(data, small_tokenizer, text_field="body").fingerprint() != base
    full = streaming(data, small_tokenizer)
    full.load_state_dict({"num_streams": 1, "streams": {}, "fingerprint": base})
    json.dumps(full.summary())


def test_invalid_utf8_in_a_local_jsonl_names_the_row_eager_and_in_each_stream(
    small_tokenizer: Path, tmp_path: Path, cache: Path
) -> None:
    lines = [json.dumps({"text": f"row {i}"}).encode() for i in range(9)]
    lines[5] = b'{"text": "bad \xff byte"}'  # the JSON reader passes the byte on as it is
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(line + b"\n" for line in lines))
    said = r"row 5 \(counted from 0\): its text holds invalid UTF-8 at byte 4; decode"
    with pytest.raises(InputError, match=said):
        eager(str(bad), SEQ_LEN, small_tokenizer, cache_dir=cache)
    with pytest.raises(InputError, match=said):  # row 5 is stream 1 of 2's third row
        list(streaming(bad, small_tokenizer, rank=1, world_size=2))
    assert len(list(streaming(bad, small_tokenizer, rank=0, world_size=2))) > 0


def test_streaming_bad_rows_and_options(small_tokenizer: Path, tmp_path: Path) -> None:
    rows = [{"text": f"row {i}"} for i in range(9)]
    rows[7] = {"body": "no text field"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # Row 7 belongs to stream 1 of 2; its number in the source is reported.
    dataset = streaming(bad, small_tokenizer, rank=1, world_size=2)
    with pytest.raises(InputError, match=r"row 7 \(counted from 0\) has no text in field 'text'"):
        list(dataset)
    clean = [r["text"] for r in rows[0::2]]  # stream 0 of 2 never sees row 7
    got = [
        [*s["input_ids"].tolist(), int(s["labels"][-1])]
        for s in streaming(bad, small_tokenizer, world_size=2)
    ]
    assert got == windows_of(oracle_docs(small_tokenizer, clean))
    with pytest.raises(ConfigError, match="rank 2 must be below world_size 2"):
        streaming(bad, small_tokenizer, rank=2, world_size=2)
    with pytest.raises(ConfigError, match="world_size"):
        streaming(bad, small_tokenizer, world_size=0)


def test_streaming_pickles_small(small_tokenizer: Path, tmp_path: Path) -> None:
    dataset = streaming(write_jsonl(tmp_path / "d.jsonl", TEXTS), small_tokenizer)
    dataset.load_state_dict({"num_streams": 1, "streams": {"0": [3, 1]}})
    copy = pickle.loads(pickle.dumps(dataset))
    assert len(pickle.dumps(dataset)) < 10_000
    assert copy.state_dict() == dataset.state_dict()
    assert [s["input_ids"].tolist() for s in copy] == [s["input_ids"].tolist() for s in dataset]


def test_cache_dir_default_is_under_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert hf_text.default_cache_dir() == tmp_path / "data_io" / "hf_text"


def test_default_eos_is_the_tokenizers_own(small_tokenizer: Path, tmp_path: Path, cache: Path):
    data = write_jsonl(tmp_path / "d.jsonl", TEXTS[:30])
    declared = json.loads((small_tokenizer.parent / "tokenizer_config.json").read_text())
    eos = Tokenizer.from_file(str(small_tokenizer)).token_to_id(declared["eos_token"])
    dataset = HuggingFaceDataset(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)
    assert dataset.eos_token_id == eos
    stream = StreamingHuggingFaceDataset(str(data), SEQ_LEN, small_tokenizer, eos_token_id=eos)
    assert [s["input_ids"].tolist() for s in stream] == [
        dataset[i]["input_ids"].tolist() for i in range(len(dataset))
    ]


def test_the_encoder_reads_the_arrow_column_in_place(
    small_tokenizer: Path, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both loaders hand the encoder the rows' Arrow strings, never Python str objects, and
    still give the oracle's windows (a stride of streams takes its rows as Arrow too)."""
    from data_io.tokenizer.encoder import TextEncoder

    seen: list[type] = []
    original = TextEncoder.encode_batch

    def recording(self: TextEncoder, texts: Any, eos_id: Any = None) -> Any:
        seen.append(type(texts))
        return original(self, texts, eos_id)

    monkeypatch.setattr(TextEncoder, "encode_batch", recording)
    data = write_parquet(tmp_path / "docs.parquet", TEXTS)
    expected = windows_of(oracle_docs(small_tokenizer, TEXTS))
    assert items(eager(str(data), SEQ_LEN, small_tokenizer, cache_dir=cache)) == [
        plain_item(w) for w in expected
    ]
    streamed = [
        [*s["input_ids"].tolist(), int(s["labels"][-1])]
        for rank in range(2)
        for s in streaming(data, small_tokenizer, rank=rank, world_size=2)
    ]
    assert len(streamed) > 0
    assert seen and set(seen) == {pa.ChunkedArray}, seen


def test_a_loader_of_another_rank_than_its_stream_is_refused_at_once(
    small_tokenizer: Path, tmp_path: Path
) -> None:
    from data_io.load import StatefulLoader

    data = write_jsonl(tmp_path / "docs.jsonl", TEXTS)
    stream = streaming(data, small_tokenizer, rank=1, world_size=2)
    with pytest.raises(ConfigError, match=r"built for rank 1 of 2 and the loader is rank 0 of 1"):
        StatefulLoader(stream, None, batch_size=2, rank=0, world_size=1)
    assert StatefulLoader(stream, None, batch_size=2, rank=1, world_size=2).rank == 1
