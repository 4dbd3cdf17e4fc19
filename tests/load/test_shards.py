"""MemoryMappedDataset over flat token shards: windows, packing, metadata and bad input.

Every window is compared with an independent re-derivation (plain Python loops over each file's
tokens), and packing with a per-token Python oracle of the rule "an EOS belongs to the document
it ends".
"""

from __future__ import annotations

import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch.utils.data import DataLoader

from data_io.errors import ConfigError, InputError
from data_io.load import MemoryMappedDataset
from data_io.load.datasets.shards import pack_window
from tests.prepare.helpers import documents, write_txt
from tests.prepare.test_api import run

EOS = 7


def write_npy(folder: Path, shards: dict[str, list[int]], dtype: str) -> dict[str, list[int]]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, tokens in shards.items():
        np.save(folder / name, np.array(tokens, dtype=dtype))
    return shards


def write_bin(folder: Path, shards: dict[str, list[int]], dtype: str) -> dict[str, list[int]]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, tokens in shards.items():
        np.array(tokens, dtype=dtype).tofile(folder / name)
    return shards


def random_shards(rng: np.random.Generator, names: list[str], high: int) -> dict[str, list[int]]:
    return {name: rng.integers(0, high, int(rng.integers(0, 60))).tolist() for name in names}


def oracle_windows(shards: dict[str, list[int]], seq_len: int) -> list[list[int]]:
    """Windows by hand: per file in sorted order, consecutive seq_len runs, short tail dropped."""
    windows = []
    for name in sorted(shards):
        tokens = shards[name]
        start = 0
        while start + seq_len <= len(tokens):
            windows.append(tokens[start : start + seq_len])
            start += seq_len
    return windows


def oracle_packed(window: list[int], eos: int) -> dict[str, list[int]]:
    """The packing rule, one token at a time."""
    doc, docs = 0, []
    for token in window:
        docs.append(doc)
        if token == eos:
            doc += 1
    n = len(window) - 1
    labels = [window[i + 1] if docs[i] == docs[i + 1] else -100 for i in range(n)]
    positions, cu = [], [0]
    for i in range(n):
        if i > 0 and docs[i] != docs[i - 1]:
            cu.append(i)
        positions.append(0 if i == 0 or docs[i] != docs[i - 1] else positions[-1] + 1)
    cu.append(n)
    return {
        "input_ids": window[:-1],
        "labels": labels,
        "doc_ids": docs[:-1],
        "position_ids": positions,
        "cu_seqlens": cu,
    }


def as_lists(sample: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    return {key: value.tolist() for key, value in sample.items()}


def check_plain(ds: MemoryMappedDataset, shards: dict[str, list[int]], seq_len: int) -> None:
    expected = oracle_windows(shards, seq_len)
    assert len(ds) == len(expected)
    for i, window in enumerate(expected):
        item = ds[i]
        assert item["input_ids"].dtype == torch.long and item["labels"].dtype == torch.long
        assert item["input_ids"].tolist() == window[:-1]
        assert item["labels"].tolist() == window[1:]
        assert ds[i - len(ds)]["input_ids"].tolist() == window[:-1]  # negative index


# --- windows ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
@pytest.mark.parametrize("seq_len", [2, 3, 5, 8, 17])
def test_npy_windows_match_oracle(tmp_path: Path, dtype: str, seq_len: int) -> None:
    rng = np.random.default_rng(seq_len)
    high = 60_000 if dtype == "uint16" else 4_000_000_000
    names = ["b.npy", "a.npy", "c.npy", "d.npy", "e.npy"]
    shards = write_npy(tmp_path, random_shards(rng, names, high), dtype)
    shards["e.npy"] = write_npy(tmp_path, {"e.npy": [1] * 40}, dtype)["e.npy"]  # >= 1 window
    check_plain(MemoryMappedDataset(tmp_path, seq_len), shards, seq_len)


@pytest.mark.parametrize(
    ("meta_name", "content", "dtype"),
    [
        ("dataset_metadata.json", {"dtype": "uint16", "num_shards": 3}, "uint16"),
        ("dataset_metadata.json", {"token_dtype": "uint32"}, "uint32"),
        ("metadata.yaml", {"name": "c4", "tokenized_info": {"dtype": "uint16"}}, "uint16"),
        ("metadata.yaml", {"token_dtype": "int32"}, "int32"),
        ("dataset_metadata.json", {"dtype": ">u2"}, ">u2"),  # big-endian is honoured
    ],
)
def test_bin_windows_with_declared_dtype(
    tmp_path: Path, meta_name: str, content: dict, dtype: str
) -> None:
    rng = np.random.default_rng(1)
    shards = write_bin(tmp_path, random_shards(rng, ["s1.bin", "s0.bin", "s2.bin"], 30_000), dtype)
    shards["s3.bin"] = write_bin(tmp_path, {"s3.bin": list(range(30))}, dtype)["s3.bin"]
    text = json.dumps(content) if meta_name.endswith(".json") else yaml.safe_dump(content)
    (tmp_path / meta_name).write_text(text)
    ds = MemoryMappedDataset(tmp_path, 6, file_pattern="*.bin")
    check_plain(ds, shards, 6)


def test_mypt_layout_metadata_in_parent(tmp_path: Path) -> None:
    """MyPT keeps dataset_metadata.json beside train/ and val/."""
    shards = write_bin(tmp_path / "train", {"shard_00000.bin": list(range(25))}, "uint32")
    (tmp_path / "dataset_metadata.json").write_text(json.dumps({"dtype": "uint32"}))
    check_plain(MemoryMappedDataset(tmp_path / "train", 5, file_pattern="*.bin"), shards, 5)


def test_dtype_is_not_guessed_from_size(tmp_path: Path) -> None:
    """A uint16 shard with an even token count is 4-byte aligned; it must still read as uint16."""
    tokens = [1, 2, 3, 4, 5, 6, 7, 8]
    write_bin(tmp_path, {"a.bin": tokens}, "uint16")
    (tmp_path / "metadata.yaml").write_text("dtype: uint16\n")
    ds = MemoryMappedDataset(tmp_path, 8, file_pattern="*.bin")
    assert ds[0]["input_ids"].tolist() == tokens[:-1]


def test_summary_reports_dropped_tails(tmp_path: Path) -> None:
    write_npy(
        tmp_path, {"a.npy": list(range(23)), "b.npy": [1, 2], "c.npy": list(range(10))}, "uint16"
    )
    summary = MemoryMappedDataset(tmp_path, 5).summary()
    assert summary["windows"] == 4 + 0 + 2
    assert summary["tokens"] == 35
    assert summary["dropped_tail_tokens"] == 3 + 2 + 0
    assert summary["files_with_dropped_tail"] == 2
    assert summary["files_without_windows"] == ["b.npy"]
    assert summary["dtypes"] == ["uint16"]


def test_index_errors(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": list(range(10))}, "uint16")
    ds = MemoryMappedDataset(tmp_path, 5)
    with pytest.raises(IndexError, match="index 2 out of range for 2 windows"):
        ds[2]
    with pytest.raises(IndexError, match="index -3"):
        ds[-3]
    with pytest.raises(TypeError, match="integer"):
        ds["0"]  # type: ignore[index]
    assert ds[np.int64(1)]["labels"].tolist() == [6, 7, 8, 9]


def test_pickle_drops_open_files(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": list(range(1000))}, "uint32")
    ds = MemoryMappedDataset(tmp_path, 10)
    first = ds[5]
    blob = pickle.dumps(ds)
    assert len(blob) < 2000  # the recipe, not the tokens
    again = pickle.loads(blob)
    assert again[5]["input_ids"].tolist() == first["input_ids"].tolist()


# --- packing ---------------------------------------------------------------------------------


def random_window(rng: np.random.Generator, length: int, eos_rate: float) -> list[int]:
    window = rng.integers(0, 20, length)
    window[window == EOS] = EOS + 1  # EOS only where drawn below
    window[rng.random(length) < eos_rate] = EOS
    return window.tolist()


SPECIAL_WINDOWS = [
    [EOS, 1, 2, 3, 4],  # EOS at window start
    [1, 2, 3, 4, EOS],  # EOS at window end opens nothing
    [1, 2, 3, EOS, 4],  # EOS as the last input
    [1, EOS, EOS, EOS, 2, 3],  # consecutive EOS: one-token documents
    [1, 2, 3, 4, 5, 6],  # no EOS
    [EOS, EOS],  # smallest window
    [EOS, EOS, EOS, EOS],
]


@pytest.mark.parametrize("window", SPECIAL_WINDOWS)
def test_pack_window_special_cases(window: list[int]) -> None:
    got = as_lists(pack_window(np.array(window), EOS, position_ids=True, cu_seqlens=True))
    assert got == oracle_packed(window, EOS)


def test_pack_window_random_against_oracle() -> None:
    rng = np.random.default_rng(7)
    for trial in range(400):
        length = int(rng.integers(2, 40))
        window = random_window(rng, length, eos_rate=[0.0, 0.1, 0.5, 0.9][trial % 4])
        sample = pack_window(np.array(window), EOS, position_ids=True, cu_seqlens=True)
        assert as_lists(sample) == oracle_packed(window, EOS), window
        assert sample["cu_seqlens"].dtype == torch.int32
        assert sample["doc_ids"].dtype == torch.long


def test_pack_without_optional_keys() -> None:
    sample = pack_window(np.array([1, EOS, 2]), EOS)
    assert sorted(sample) == ["doc_ids", "input_ids", "labels"]
    assert sample["labels"].tolist() == [EOS, -100]


def test_packed_dataset_against_oracle(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    shards = {f"{i:02d}.npy": random_window(rng, int(rng.integers(5, 80)), 0.15) for i in range(6)}
    write_npy(tmp_path, shards, "uint16")
    ds = MemoryMappedDataset(
        tmp_path, 9, pack_sequences=True, eos_token_id=EOS, position_ids=True, cu_seqlens=True
    )
    expected = oracle_windows(shards, 9)
    assert len(ds) == len(expected)
    for i, window in enumerate(expected):
        assert as_lists(ds[i]) == oracle_packed(window, EOS)


# --- DataLoader ------------------------------------------------------------------------------


def test_dataloader_two_workers_matches_direct(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    write_npy(tmp_path, {f"{i}.npy": random_window(rng, 100, 0.1) for i in range(5)}, "uint32")
    ds = MemoryMappedDataset(tmp_path, 11, pack_sequences=True, eos_token_id=EOS)
    loader = DataLoader(ds, batch_size=4, num_workers=2, shuffle=False)
    batches = list(loader)
    for key in ("input_ids", "labels", "doc_ids"):
        got = torch.cat([batch[key] for batch in batches])
        assert torch.equal(got, torch.stack([ds[i][key] for i in range(len(ds))]))


def test_dataloader_variable_cu_seqlens_unbatched(tmp_path: Path) -> None:
    """cu_seqlens differs in length per window, so it is loaded one sample at a time."""
    rng = np.random.default_rng(12)
    write_npy(tmp_path, {"x.npy": random_window(rng, 200, 0.2)}, "uint16")
    ds = MemoryMappedDataset(
        tmp_path, 13, pack_sequences=True, eos_token_id=EOS, position_ids=True, cu_seqlens=True
    )
    loaded = list(DataLoader(ds, batch_size=None, num_workers=2))
    assert len(loaded) == len(ds)
    for i, sample in enumerate(loaded):
        assert as_lists(sample) == as_lists(ds[i])


# --- bad input -------------------------------------------------------------------------------


def test_missing_folder_and_no_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nowhere: shard folder does not exist"):
        MemoryMappedDataset(tmp_path / "nowhere", 4)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match=r"file: shard folder is not a directory"):
        MemoryMappedDataset(tmp_path / "file", 4)
    write_npy(tmp_path / "d", {"a.npy": [1, 2, 3]}, "uint16")
    with pytest.raises(InputError, match=r"/d: no files match '\*\.bin'; it holds \.npy shards"):
        MemoryMappedDataset(tmp_path / "d", 2, file_pattern="*.bin")
    # The pattern's own stem with the other suffix: not another set of shards.
    with pytest.raises(InputError, match=r"or point data_dir at the folder that holds them"):
        MemoryMappedDataset(tmp_path / "d", 2, file_pattern="train_*.bin")
    # A prepare output's root: its shards are in the split folders, which the message names.
    (tmp_path / "out" / "train").mkdir(parents=True)
    (tmp_path / "out" / "val").mkdir()
    with pytest.raises(InputError, match=r"split folders: pass data_dir=.*out/train or .*out/val"):
        MemoryMappedDataset(tmp_path / "out", 2, file_pattern="*.bin")
    with pytest.raises(InputError, match=r"no files match '\*\.npy'; the folder is empty"):
        MemoryMappedDataset(tmp_path / "out" / "val", 2)
    (tmp_path / "d" / "notes.txt").write_text("x")
    with pytest.raises(InputError, match=r"not \.npy or \.bin shards \(notes\.txt\)"):
        MemoryMappedDataset(tmp_path / "d", 2, file_pattern="*")


@pytest.mark.parametrize("seq_len", [0, 1, -5, 2.0, True, "8", None])
def test_bad_seq_len(tmp_path: Path, seq_len: object) -> None:
    write_npy(tmp_path, {"a.npy": [1, 2, 3]}, "uint16")
    with pytest.raises(ConfigError, match=r"seq_len must be an integer >= 2"):
        MemoryMappedDataset(tmp_path, seq_len)  # type: ignore[arg-type]


def test_seq_len_longer_than_every_shard(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": [1] * 9, "b.npy": [1] * 12}, "uint16")
    with pytest.raises(ConfigError, match=r"seq_len=13 is longer than every shard .*b\.npy, 12"):
        MemoryMappedDataset(tmp_path, 13)
    assert len(MemoryMappedDataset(tmp_path, 12)) == 1


def test_bad_packing_options(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": [1] * 9}, "uint16")
    with pytest.raises(ConfigError, match="eos_token_id must be an integer >= 0"):
        MemoryMappedDataset(tmp_path, 3, pack_sequences=True)
    with pytest.raises(ConfigError, match="eos_token_id must be an integer >= 0"):
        MemoryMappedDataset(tmp_path, 3, pack_sequences=True, eos_token_id=-1)
    with pytest.raises(ConfigError, match="pass pack_sequences=True"):
        MemoryMappedDataset(tmp_path, 3, cu_seqlens=True)
    with pytest.raises(ConfigError, match="pass pack_sequences=True"):
        MemoryMappedDataset(tmp_path, 3, eos_token_id=EOS, position_ids=True)


def test_truncated_npy(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": list(range(50)), "b.npy": list(range(50))}, "uint32")
    data = (tmp_path / "b.npy").read_bytes()
    (tmp_path / "b.npy").write_bytes(data[:-6])
    with pytest.raises(InputError, match=r"b\.npy: unreadable or truncated \.npy shard"):
        MemoryMappedDataset(tmp_path, 5)
    (tmp_path / "b.npy").write_bytes(data[:40])  # header cut
    with pytest.raises(InputError, match=r"b\.npy: unreadable or truncated"):
        MemoryMappedDataset(tmp_path, 5)
    (tmp_path / "b.npy").write_bytes(b"")
    with pytest.raises(InputError, match=r"b\.npy: unreadable or truncated"):
        MemoryMappedDataset(tmp_path, 5)


@pytest.mark.parametrize(
    ("array", "message"),
    [
        (np.zeros((3, 4), dtype=np.uint16), r"shape \(3, 4\)"),
        (np.zeros(8, dtype=np.float32), "dtype float32"),
        (np.zeros(8, dtype=np.uint64), "dtype uint64"),
    ],
)
def test_npy_not_a_token_array(tmp_path: Path, array: np.ndarray, message: str) -> None:
    np.save(tmp_path / "bad.npy", array)
    with pytest.raises(InputError, match=rf"bad\.npy: a shard must be a 1-D array.*{message}"):
        MemoryMappedDataset(tmp_path, 2)


def test_bin_without_declared_dtype(tmp_path: Path) -> None:
    write_bin(tmp_path, {"s.bin": list(range(16))}, "uint16")
    with pytest.raises(InputError, match=r"s\.bin: raw \.bin shard without a declared token dtype"):
        MemoryMappedDataset(tmp_path, 4, file_pattern="*.bin")
    (tmp_path / "dataset_metadata.json").write_text(json.dumps({"vocab_size": 50257}))
    with pytest.raises(InputError, match=r'writing \{"dtype": "uint16"\}.*dataset_metadata\.json'):
        MemoryMappedDataset(tmp_path, 4, file_pattern="*.bin")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("dataset_metadata.json", '{"dtype": "float32"}', r"'dtype' is 'float32', not a token"),
        ("dataset_metadata.json", '{"dtype": "uint64"}', "not a token dtype"),
        ("dataset_metadata.json", '{"dtype": 16}', "16, not a token dtype"),
        ("dataset_metadata.json", '{"dtype": "banana"}', "'banana', not a token dtype"),
        ("dataset_metadata.json", '{"dtype": ', "cannot read the shard metadata"),
        ("dataset_metadata.json", '["uint16"]', "expected a mapping"),
        ("metadata.yaml", "dtype: [uint16\n", "cannot read the shard metadata"),
        ("metadata.yaml", "- uint16\n", "expected a mapping"),
    ],
)
def test_bad_metadata(tmp_path: Path, name: str, text: str, message: str) -> None:
    write_bin(tmp_path, {"s.bin": list(range(16))}, "uint16")
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=rf"{name}: .*{message}"):
        MemoryMappedDataset(tmp_path, 4, file_pattern="*.bin")


@pytest.mark.parametrize(
    ("metadata", "pack", "message"),
    [
        # .npy shards: the header and a declared dtype must agree (the header was read alone).
        (
            {"dtype": "uint32"},
            False,
            r"s\.npy: its header says uint16, and .* declares dtype uint32",
        ),
        ({"dtype": "<u2"}, False, None),  # the same dtype, spelled otherwise
        # An EOS at or past the declared vocabulary, or past what the dtype holds.
        ({"vocab_size": 5000, "eos_id": 70000}, True, r"eos_id=70000, but .*vocab_size=5000"),
        (
            {"eos_id": 70000},
            True,
            r"eos_token_id=70000 \(.*\) cannot occur in .*s\.npy, whose "
            r"uint16 ids go up to 65535: .*fix the metadata file",
        ),
        ({"eos_id": 999}, True, None),
        # Not a mapping: named for .npy shards too, where no dtype is needed from it.
        ([1, 2], False, r"dataset_metadata\.json: expected a mapping"),
    ],
)
def test_metadata_that_disagrees_with_npy_shards_or_itself_is_refused(
    tmp_path: Path, metadata: object, pack: bool, message: str | None
) -> None:
    write_npy(tmp_path, {"s.npy": list(range(1000))}, "uint16")
    (tmp_path / "dataset_metadata.json").write_text(json.dumps(metadata))
    options = {"pack_sequences": True} if pack else {}
    if message is None:
        assert len(MemoryMappedDataset(tmp_path, 4, **options)) == 250
    else:
        with pytest.raises(InputError, match=message):
            MemoryMappedDataset(tmp_path, 4, **options)


def test_an_eos_a_dtype_cannot_hold_is_refused_when_packing(tmp_path: Path) -> None:
    write_npy(tmp_path, {"s.npy": list(range(100))}, "uint16")
    with pytest.raises(InputError, match=r"eos_token_id=70000 cannot occur .*pass the EOS id"):
        MemoryMappedDataset(tmp_path, 4, pack_sequences=True, eos_token_id=70000)
    assert len(MemoryMappedDataset(tmp_path, 4, eos_token_id=70000)) == 25  # unpacked: unused


def test_conflicting_metadata(tmp_path: Path) -> None:
    write_bin(tmp_path, {"s.bin": list(range(16))}, "uint16")
    (tmp_path / "dataset_metadata.json").write_text(json.dumps({"dtype": "uint16"}))
    (tmp_path / "metadata.yaml").write_text("token_dtype: uint32\n")
    with pytest.raises(
        InputError, match=r"conflicting shard dtypes: .*uint16.*metadata\.yaml says"
    ):
        MemoryMappedDataset(tmp_path, 4, file_pattern="*.bin")
    (tmp_path / "metadata.yaml").write_text("token_dtype: <u2\n")  # same dtype, other spelling
    assert len(MemoryMappedDataset(tmp_path, 4, file_pattern="*.bin")) == 4


def test_bin_size_not_a_multiple_of_dtype(tmp_path: Path) -> None:
    write_bin(tmp_path, {"a.bin": list(range(8))}, "uint32")
    (tmp_path / "b.bin").write_bytes(np.arange(8, dtype=np.uint32).tobytes()[:-1])
    (tmp_path / "dataset_metadata.json").write_text(json.dumps({"dtype": "uint32"}))
    with pytest.raises(InputError, match=r"b\.bin: 31 bytes is not a whole number of uint32"):
        MemoryMappedDataset(tmp_path, 4, file_pattern="*.bin")


def test_shard_changed_after_start(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": list(range(20))}, "uint16")
    ds = MemoryMappedDataset(tmp_path, 5)
    write_npy(tmp_path, {"a.npy": list(range(10))}, "uint16")
    with pytest.raises(InputError, match=r"a\.npy: now \(10,\) uint16, was \(20,\)"):
        ds[0]
    (tmp_path / "a.npy").unlink()
    with pytest.raises(InputError, match=r"a\.npy: cannot open the shard"):
        ds[0]


@pytest.mark.parametrize(
    "array",
    [
        np.arange(5, dtype=np.uint16),
        np.arange(0, dtype=np.uint32),
        np.arange(7, dtype=">u2"),
        np.arange(3, dtype=np.int64),
        np.arange(12, dtype=np.uint16).reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
    ],
)
def test_header_reader_agrees_with_numpy(tmp_path: Path, array: np.ndarray) -> None:
    from data_io.load.datasets.shards import _read_npy_header

    path = tmp_path / "a.npy"
    np.save(path, array)
    loaded = np.load(path, mmap_mode="r")
    shape, dtype, offset, size = _read_npy_header(path)
    assert (shape, dtype, offset, size) == (
        loaded.shape,
        loaded.dtype,
        loaded.offset,
        path.stat().st_size,
    )
    with open(path, "wb") as f:  # a version 2.0 header, as numpy writes for huge headers
        np.lib.format.write_array(f, array, version=(2, 0))
    loaded = np.load(path, mmap_mode="r")
    assert _read_npy_header(path)[:3] == (loaded.shape, loaded.dtype, loaded.offset)


def test_big_endian_shard_reads_the_right_ids(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(300, 330, dtype=">u2"))
    ds = MemoryMappedDataset(tmp_path, 10)
    assert ds.window(1).tolist() == list(range(310, 320))


def test_folder_matching_the_pattern(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": list(range(20))}, "uint16")
    (tmp_path / "b.npy").mkdir()
    with pytest.raises(InputError, match=r"b\.npy: unreadable"):
        MemoryMappedDataset(tmp_path, 5)
    (tmp_path / "dataset_metadata.json").write_text('{"dtype": "uint16"}')
    (tmp_path / "c.bin").mkdir()
    with pytest.raises(InputError, match=r"c\.bin: matches the shard pattern but is not a file"):
        MemoryMappedDataset(tmp_path, 5, file_pattern="*.bin")


def test_vocab_check_names_the_bad_token(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": list(range(40))}, "uint16")
    ds = MemoryMappedDataset(tmp_path, 40, vocab_size=20)
    with pytest.raises(InputError, match=r"a\.npy: token 20 is id 20, not below vocab_size=20"):
        ds[0]
    with pytest.raises(InputError, match=r"token 20 is id 20"):
        ds.get_batch([0])


def test_negative_ids_are_refused(tmp_path: Path) -> None:
    write_npy(tmp_path, {"a.npy": [1, 2, -5, 3, 4, 5]}, "int32")
    ds = MemoryMappedDataset(tmp_path, 3)
    with pytest.raises(InputError, match=r"a\.npy: token 2 is id -5; token ids are never negative"):
        ds[0]
    assert ds[1]["input_ids"].tolist() == [3, 4]


def test_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    write_npy(tmp_path / "shards", {"a.npy": list(range(10))}, "uint16")
    assert len(MemoryMappedDataset("~/shards", 5)) == 2


def test_a_prepared_split_is_read_only_as_its_metadata_lists_it(
    small_tokenizer: Path, tmp_path: Path
) -> None:
    """A stray file, a shard cut short by whole tokens (which no size check sees) and a missing
    shard are refused against prepare's list; a shard the pattern leaves out is the caller's."""
    write_txt(tmp_path / "in" / "a.txt", documents(80, seed=3))
    run([tmp_path / "in"], tmp_path / "out", small_tokenizer, val_fraction=0.0)
    train = tmp_path / "out" / "train"
    shards = sorted(train.glob("*.bin"))
    assert len(shards) >= 2
    whole = MemoryMappedDataset(train, 8, file_pattern="*.bin")

    def variant(name: str) -> Path:
        copy = tmp_path / name
        shutil.copytree(tmp_path / "out", copy)
        return copy / "train"

    stray = variant("stray")
    shutil.copy(stray / shards[0].name, stray / "shard_99999.bin")
    with pytest.raises(InputError, match=r"shard_99999\.bin: a file .*dataset_metadata\.json"):
        MemoryMappedDataset(stray, 8, file_pattern="*.bin")
    # MyPT's guide adds data by moving another run's shards in, over shards of the same names:
    # the message names the way that works (prepare again into the same folder).
    write_txt(tmp_path / "new" / "b.txt", documents(30, seed=4))
    run([tmp_path / "new"], tmp_path / "more", small_tokenizer, val_fraction=0.0)
    moved = variant("moved")
    # Its last shard, of fewer tokens, over shard 0 (a full one of the same count passes this
    # check: `data_io inspect` finds it by the recorded SHA-256).
    shutil.copy(sorted((tmp_path / "more" / "train").glob("*.bin"))[-1], moved / shards[0].name)
    with pytest.raises(
        InputError,
        match=r"the same name moved over it.*run prepare again with "
        r"the same output folder",
    ):
        MemoryMappedDataset(moved, 8, file_pattern="*.bin")
    cut = variant("cut")
    data = (cut / shards[0].name).read_bytes()
    meta = json.loads((tmp_path / "out" / "dataset_metadata.json").read_text())
    (cut / shards[0].name).write_bytes(data[: len(data) - 8 * np.dtype(meta["dtype"]).itemsize])
    with pytest.raises(InputError, match=r"tokens, .* records .*cut short or replaced"):
        MemoryMappedDataset(cut, 8, file_pattern="*.bin")
    gone = variant("gone")
    (gone / shards[-1].name).unlink()
    with pytest.raises(InputError, match=rf"{shards[-1].name}: missing \(1 of the"):
        MemoryMappedDataset(gone, 8, file_pattern="*.bin")
    # The first shard alone, by the caller's choice: read as it is.
    first = MemoryMappedDataset(train, 8, file_pattern=shards[0].name)
    assert 0 < len(first) < len(whole)


def test_open_shards_close_at_interpreter_exit(tmp_path: Path, monkeypatch) -> None:
    """At the interpreter's last collection a module's globals may already be None while
    datasets with open shard files are collected (a phased mixture's rebuilt loader showed
    "Exception ignored in ... __del__: 'NoneType' object has no attribute 'suppress'"): the
    files close without any module global."""
    import os

    import data_io.load.datasets.shards as module

    write_npy(tmp_path, {"s.npy": list(range(100))}, "uint16")
    dataset = MemoryMappedDataset(tmp_path, 4)
    dataset[0]  # opens the shard
    (fd,) = dataset._files.values()
    for name in ("contextlib", "os", "np"):  # as teardown leaves them
        monkeypatch.setattr(module, name, None, raising=False)
    dataset.__del__()
    monkeypatch.undo()
    with pytest.raises(OSError):
        os.fstat(fd)  # closed


def test_a_sampled_folder_or_its_row_tables_are_not_read_as_shards(tmp_path: Path) -> None:
    """A sampled folder's tokens.npy (and an epoch's int64 row offsets) are 1-D integer .npy
    files: with file_pattern='*.npy' they were read as token shards, silently."""
    from tests.sampled_fixture import write_sampled

    sampled = tmp_path / "sampled"
    write_sampled(sampled, n_rows=30, epochs=1)
    with pytest.raises(InputError, match=rf"^{sampled}: a sampled folder .*SampledDataset"):
        MemoryMappedDataset(sampled, 8, file_pattern="*.npy")
    with pytest.raises(InputError, match=r"epoch_0: a tokenized task or a sampled epoch .*"):
        MemoryMappedDataset(sampled / "epoch_0", 8, file_pattern="*.npy")
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer_info.json").write_text("{}")
    with pytest.raises(InputError, match=r"tok: a tokenized folder .*sample it"):
        MemoryMappedDataset(tmp_path / "tok", 8, file_pattern="*.npy")
    # Its tasks' tokens named by the pattern: flat streams, read.
    (tmp_path / "tok" / "task").mkdir()
    np.save(tmp_path / "tok" / "task" / "tokens.npy", np.arange(20, dtype=np.uint16))
    assert len(MemoryMappedDataset(tmp_path / "tok", 8, file_pattern="*/tokens.npy")) == 2
    # Its tasks' row tables matched too (`*/*.npy`): refused as such, not read as shards.
    for name in ("inst_start", "inst_len", "resp_start", "resp_len"):
        np.save(tmp_path / "tok" / "task" / f"{name}.npy", np.zeros(2, dtype=np.uint64))
    with pytest.raises(InputError, match=r"tok: a tokenized task or a sampled epoch"):
        MemoryMappedDataset(tmp_path / "tok", 8, file_pattern="*/*.npy")
    # A task's (or the pool's) tokens.npy named on its own is a flat stream of rows: read.
    assert len(MemoryMappedDataset(sampled, 8, file_pattern="tokens.npy")) > 0
    np.save(tmp_path / "task_tokens.npy", np.arange(20, dtype=np.uint16))
    task = sampled / "epoch_0"
    (task / "tokens.npy").write_bytes((tmp_path / "task_tokens.npy").read_bytes())
    assert len(MemoryMappedDataset(task, 8, file_pattern="tokens.npy")) == 2
    with pytest.raises(InputError, match=r"or pass file_pattern='tokens.npy'"):
        MemoryMappedDataset(task, 8, file_pattern="*.npy")
    # A flat folder that merely holds a metadata.json beside its shards is still read.
    (tmp_path / "flat").mkdir()
    np.save(tmp_path / "flat" / "a.npy", np.arange(20, dtype=np.uint16))
    (tmp_path / "flat" / "metadata.json").write_text("{}")
    assert len(MemoryMappedDataset(tmp_path / "flat", 8, file_pattern="*.npy")) == 2
