"""What a shard folder's producer declared is honoured: EOS, vocabulary, content identity.

The folders are real ``data_io prepare`` outputs (MyPT's layout: dataset_metadata.json beside
train/ and val/) and hand-written metadata, as another producer would leave them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from data_io.errors import ConfigError, InputError
from data_io.load import MemoryMappedDataset, StatefulLoader
from data_io.load.build import build_data
from data_io.load.config import config_from_dict
from data_io.load.order.samplers import ShuffledOrder
from data_io.prepare import prepare
from tests.prepare.helpers import documents, write_txt

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A char-tokenized dataset: the EOS id is 0 and the vocabulary its characters + 1."""
    folder = tmp_path_factory.mktemp("prepared")
    text = write_txt(folder / "in" / "a.txt", documents(300, seed=5))
    out = folder / "out"
    prepare([text], out, tokenizer="char", tokens_per_shard=4000, progress=False)
    return out


def metadata(out: Path) -> dict:
    return json.loads((out / "dataset_metadata.json").read_text())


def oracle_pack(window: np.ndarray, eos: int) -> tuple[list[int], list[int]]:
    """Labels and positions of one packed window, token by token: after an EOS the label is
    -100 and the next position restarts at 0."""
    labels, positions, pos = [], [], 0
    for i in range(len(window) - 1):
        positions.append(pos)
        labels.append(-100 if window[i] == eos else int(window[i + 1]))
        pos = 0 if window[i] == eos else pos + 1
    return labels, positions


def test_packing_uses_the_declared_eos(prepared: Path) -> None:
    meta = metadata(prepared)
    eos = meta["eos_id"]
    ds = MemoryMappedDataset(prepared / "train", 65, file_pattern="*.bin", pack_sequences=True,
                             position_ids=True)  # fmt: skip
    assert ds.eos_token_id == eos and ds.vocab_size == meta["vocab_size"]
    checked = 0
    for i in range(len(ds)):
        window = ds.window(i)
        if eos not in window[:-1]:
            continue
        item = ds[i]
        labels, positions = oracle_pack(window, eos)
        assert item["labels"].tolist() == labels
        assert item["position_ids"].tolist() == positions
        checked += 1
    assert checked > 5


def test_config_eos_contradicting_the_shards_is_refused(prepared: Path) -> None:
    eos = metadata(prepared)["eos_id"]
    with pytest.raises(ConfigError, match=rf"eos_token_id={eos + 3} contradicts .*eos_id={eos}"):
        MemoryMappedDataset(prepared / "train", 65, file_pattern="*.bin", pack_sequences=True,
                            eos_token_id=eos + 3)  # fmt: skip
    raw = {"data": {"dataset_path": str(prepared / "train"), "file_pattern": "*.bin",
                    "pack_sequences": True, "eos_token_id": eos + 3},
           "train": {"seq_len": 64, "batch_size": 2}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"data\.eos_token_id=\d+ contradicts .*dataset_metadata"):
        build_data(config_from_dict(raw))


def test_tokenizer_of_another_dataset_is_refused(prepared: Path, tmp_path: Path) -> None:
    """The config's tokenizer ends documents with another id than the shards: refused."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    tok = Tokenizer(WordLevel({"a": 0, "b": 1, "<|endoftext|>": 2}, unk_token="a"))
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(str(tmp_path / "tokenizer.json"))
    raw = {"data": {"dataset_path": str(prepared / "train"), "file_pattern": "*.bin",
                    "pack_sequences": True, "tokenizer_path": str(tmp_path / "tokenizer.json")},
           "train": {"seq_len": 64, "batch_size": 2}}  # fmt: skip
    with pytest.raises(ConfigError, match=r"ends documents with id 2, but .*eos_id=0"):
        build_data(config_from_dict(raw))


def test_vocab_below_the_declared_one_is_refused(prepared: Path) -> None:
    vocab = metadata(prepared)["vocab_size"]
    with pytest.raises(
        ConfigError, match=rf"vocab_size={vocab - 1} contradicts .*vocab_size={vocab}"
    ):
        MemoryMappedDataset(prepared / "train", 65, file_pattern="*.bin", vocab_size=vocab - 1)
    # A model's padded (larger) vocabulary is fine.
    assert MemoryMappedDataset(prepared / "train", 65, file_pattern="*.bin",
                               vocab_size=vocab + 64).vocab_size == vocab + 64  # fmt: skip


def test_declared_vocab_catches_out_of_vocabulary_ids(tmp_path: Path) -> None:
    np.array([1, 2, 3, 9, 4, 5], dtype=np.uint16).tofile(tmp_path / "shard_00000.bin")
    (tmp_path / "dataset_metadata.json").write_text(
        json.dumps({"dtype": "uint16", "vocab_size": 8, "eos_token_id": 5})
    )
    ds = MemoryMappedDataset(tmp_path, 3, file_pattern="*.bin")
    with pytest.raises(InputError, match=r"token 3 is id 9, not below vocab_size=8"):
        ds[1]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"eos_id": -1}, r"'eos_id' is -1, not a non-negative integer"),
        ({"vocab_size": "big"}, r"'vocab_size' is 'big'"),
    ],
)
def test_bad_declarations_are_named(tmp_path: Path, content: dict, message: str) -> None:
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.uint16))
    (tmp_path / "dataset_metadata.json").write_text(json.dumps(content))
    with pytest.raises(InputError, match=message):
        MemoryMappedDataset(tmp_path, 3)


def test_conflicting_declarations_are_named(tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.arange(10, dtype=np.uint16))
    (tmp_path / "dataset_metadata.json").write_text(json.dumps({"eos_id": 3}))
    (tmp_path / "metadata.yaml").write_text("tokenized_info:\n  eos_token_id: 4\n")
    with pytest.raises(InputError, match=r"conflicting shard metadata: .*eos_id=3.*eos_token_id=4"):
        MemoryMappedDataset(tmp_path, 3)


# -- resume identity covers content -----------------------------------------------------------


def loader_over(folder: Path) -> StatefulLoader:
    ds = MemoryMappedDataset(folder, 33, file_pattern="*.bin")
    return StatefulLoader(ds, ShuffledOrder(len(ds), seed=1), batch_size=2)


def test_same_names_and_lengths_other_tokens_do_not_resume(prepared: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(prepared, other)
    shard = sorted((other / "train").glob("shard_*.bin"))[0]
    tokens = np.fromfile(shard, dtype=np.dtype(metadata(prepared)["dtype"]))
    np.random.default_rng(0).permutation(tokens).tofile(shard)  # same name, length, dtype
    state = loader_over(prepared / "train").state_dict()
    with pytest.raises(ConfigError, match=r"saved for other data \(content saved"):
        loader_over(other / "train").load_state_dict(state)


def test_other_recorded_hash_does_not_resume(prepared: Path, tmp_path: Path) -> None:
    """Even when the sampled runs would agree, another recorded sha256 is other data."""
    other = tmp_path / "other"
    shutil.copytree(prepared, other)
    meta = metadata(other)
    meta["splits"]["train"]["shards"][0]["sha256"] = "0" * 64
    (other / "dataset_metadata.json").write_text(json.dumps(meta))
    state = loader_over(prepared / "train").state_dict()
    with pytest.raises(ConfigError, match=r"saved for other data"):
        loader_over(other / "train").load_state_dict(state)


def test_a_byte_identical_copy_elsewhere_resumes(prepared: Path, tmp_path: Path) -> None:
    copy = tmp_path / "node2" / "data"
    shutil.copytree(prepared, copy)
    first = loader_over(prepared / "train")
    it = iter(first)
    taken = [next(it) for _ in range(3)]
    resumed = loader_over(copy / "train")
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    reference = list(loader_over(prepared / "train"))
    assert len(taken) + len(list(resumed)) == len(reference)
    again = loader_over(copy / "train")
    again.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for got, want in zip(list(again), reference[3:], strict=True):
        assert torch.equal(got["input_ids"], want["input_ids"])


def test_no_close_error_at_interpreter_exit(tmp_path: Path) -> None:
    """A dataset alive at exit must not print 'Exception ignored ... os.close' (the module's
    globals are gone by then)."""
    np.save(tmp_path / "a.npy", np.arange(100, dtype=np.uint16))
    script = (
        "import sys\n"
        "from data_io.load import MemoryMappedDataset\n"
        "ds = MemoryMappedDataset(sys.argv[1], 9)\n"
        "ds[0]; ds[3]\n"
        "keep = [ds]\n"
    )
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert "Exception ignored" not in run.stderr and "Error" not in run.stderr, run.stderr
