"""Bad sampled folders and bad settings fail at construction with a message that says where."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sampled_fixture import write_sampled

from data_io.errors import ConfigError, InputError
from data_io.formats.sampled import open_epoch, open_tokens, read_metadata
from data_io.load import SampledDataset


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return write_sampled(tmp_path / "s", n_rows=40, epochs=2).path


def edit_meta(folder: Path, **changes: object) -> None:
    meta = json.loads((folder / "metadata.json").read_text())
    meta.update(changes)
    (folder / "metadata.json").write_text(json.dumps(meta))


def edit_index(folder: Path, name: str, values: np.ndarray, epoch: int = 0) -> None:
    np.save(folder / f"epoch_{epoch}" / f"{name}.npy", values)


def load_index(folder: Path, name: str, epoch: int = 0) -> np.ndarray:
    return np.load(folder / f"epoch_{epoch}" / f"{name}.npy")


def test_missing_things(tmp_path: Path, folder: Path) -> None:
    with pytest.raises(InputError, match="no such sampled folder"):
        SampledDataset(tmp_path / "nowhere")
    with pytest.raises(InputError, match=r"epoch 5 was not sampled \(sampled epochs: 0, 1\)"):
        SampledDataset(folder, epoch=5)
    (folder / "epoch_1" / "resp_len.npy").unlink()
    with pytest.raises(InputError, match=r"epoch_1/resp_len.npy: missing resp_len"):
        SampledDataset(folder, epoch=1)
    (folder / "tokens.npy").unlink()
    with pytest.raises(InputError, match=r"tokens\.npy: missing token pool"):
        SampledDataset(folder)
    (folder / "metadata.json").unlink()
    with pytest.raises(InputError, match=r"metadata\.json: missing; the folder is not a complete"):
        SampledDataset(folder)


def test_another_stages_folder_is_named_with_the_way_on(tmp_path: Path) -> None:
    tokenized = tmp_path / "tokenized"
    tokenized.mkdir()
    (tokenized / "tokenizer_info.json").write_text("{}")
    with pytest.raises(InputError, match=r"a tokenized folder .*`data_io sample tokenized_path="):
        SampledDataset(tokenized)
    shards = tmp_path / "shards"
    shards.mkdir()
    (shards / "dataset_metadata.json").write_text("{}")
    with pytest.raises(InputError, match=r"flat-shard folder \(`data_io prepare`'s or MyPT's\)"):
        SampledDataset(shards)
    tatm = tmp_path / "tatm"
    tatm.mkdir()
    (tatm / "metadata.yaml").write_text("dtype: uint16\n")
    with pytest.raises(InputError, match=r"flat-shard folder \(tatm's layout\)"):
        SampledDataset(tatm)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"vocab_size": 4096}, "'vocab_size' must be null"),
        ({"max_seq_len": "65"}, "'max_seq_len' must be an integer"),
        ({"max_seq_len": 1}, "'max_seq_len' must be >= 2"),
        ({"total_length": None}, "'total_length' must be an integer"),
        ({"tokenizer_info": []}, "'tokenizer_info' must be an object"),
        ({"tokenizer_info": {"vocab_size": -3}}, "tokenizer_info.vocab_size must be a positive"),
    ],
)
def test_bad_metadata(folder: Path, changes: dict, message: str) -> None:
    edit_meta(folder, **changes)
    with pytest.raises(InputError, match=message):
        SampledDataset(folder)


def test_metadata_not_json(folder: Path) -> None:
    (folder / "metadata.json").write_text("{not json")
    with pytest.raises(InputError, match=r"metadata\.json: not valid JSON"):
        SampledDataset(folder)
    (folder / "metadata.json").write_text("[1, 2]")
    with pytest.raises(InputError, match="expected a JSON object"):
        SampledDataset(folder)


def test_extra_metadata_keys_are_fine(folder: Path) -> None:
    edit_meta(folder, sampler_version="x", per_task={"a": 1})
    assert SampledDataset(folder, batch_max_length=128).num_steps() > 0


def test_array_shapes_and_dtypes(folder: Path) -> None:
    edit_index(folder, "inst_len", load_index(folder, "inst_len")[:-1])
    with pytest.raises(
        InputError, match=r"disagree in length \(inst_start.npy=40, inst_len.npy=39"
    ):
        SampledDataset(folder)
    edit_index(folder, "inst_len", load_index(folder, "inst_len", epoch=1).astype(np.float64))
    with pytest.raises(InputError, match="inst_len must hold integers, got dtype float64"):
        SampledDataset(folder)
    edit_index(folder, "inst_len", load_index(folder, "inst_len", epoch=1).reshape(4, 10))
    with pytest.raises(InputError, match=r"inst_len must be 1-D, got shape \(4, 10\)"):
        SampledDataset(folder)
    np.save(folder / "tokens.npy", np.zeros(10, dtype=np.float32))
    with pytest.raises(InputError, match="token pool must hold integers"):
        SampledDataset(folder)
    (folder / "tokens.npy").write_bytes(b"not an npy file")
    with pytest.raises(InputError, match=r"tokens\.npy: not a readable \.npy array"):
        SampledDataset(folder)


@pytest.mark.parametrize("name", ["resp_start.npy", "inst_len.npy"])
def test_an_empty_array_file_is_named_not_numpys_eof_error(folder: Path, name: str) -> None:
    (folder / "epoch_0" / name).write_bytes(b"")  # numpy raises EOFError, not ValueError
    with pytest.raises(InputError, match=rf"epoch_0/{name}: not a readable \.npy array .*sample"):
        SampledDataset(folder)


@pytest.mark.parametrize(
    ("name", "row", "value", "message"),
    [
        ("inst_len", 7, 0, "inst_len.npy row 7: inst_len=0"),
        ("resp_len", 3, 0, "resp_len.npy row 3: resp_len=0"),
        ("inst_start", 11, -5, "inst_start.npy row 11: inst_start=-5 is negative"),
        ("resp_start", 2, -1, "resp_start.npy row 2: resp_start=-1 is negative"),
        (
            "inst_start",
            9,
            10**9,
            "inst_start.npy row 9: instruction .* runs past the end of tokens.npy",
        ),
        (
            "resp_start",
            30,
            10**9,
            "resp_start.npy row 30: response .* runs past the end of tokens.npy",
        ),
        (
            "resp_len",
            5,
            60,
            "inst_len.npy row 5: inst_len \\+ resp_len = .* exceeds max_seq_len=65",
        ),
    ],
)
def test_bad_rows_named(folder: Path, name: str, row: int, value: int, message: str) -> None:
    values = load_index(folder, name)
    values[row] = value
    edit_index(folder, name, values)
    with pytest.raises(InputError, match=message):
        SampledDataset(folder)
    SampledDataset(folder, epoch=1)  # the other epoch is fine


def test_row_longer_than_batch_max_length_is_named(folder: Path) -> None:
    il, rl = load_index(folder, "inst_len"), load_index(folder, "resp_len")
    longest = int(np.argmax(il + rl))
    size = int(il[longest] + rl[longest])
    with pytest.raises(
        InputError, match=f"row {longest}: {size - 1} tokens .* batch_max_length={size - 2}"
    ):
        SampledDataset(folder, batch_max_length=size - 2)
    SampledDataset(folder, batch_max_length=size - 1)  # exactly fits when packed
    with pytest.raises(InputError, match=f"row {longest}: {size} tokens"):
        SampledDataset(folder, layout="causal_padded", batch_size=2, batch_max_length=size - 1)


def test_token_id_outside_vocabulary(folder: Path) -> None:
    tokens = np.load(folder / "tokens.npy")
    tokens[5] = 4096  # vocab_size in the fixture's metadata
    np.save(folder / "tokens.npy", tokens)
    ds = SampledDataset(folder, batch_max_length=128)
    with pytest.raises(InputError, match="token id 4096, outside the vocabulary"):
        list(ds)
    assert len(list(SampledDataset(folder, batch_max_length=128, check_token_ids=False))) > 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"layout": "packed"}, "layout must be one of"),
        ({"epoch": -1}, "epoch must be a non-negative integer"),
        ({"batch_size": 4}, "batch_size applies to layout='causal_padded' only"),
        ({"layout": "causal_padded"}, "needs batch_size, an integer >= 1, got None"),
        ({"layout": "causal_padded", "batch_size": "2"}, "batch_size, an integer >= 1, got '2'"),
        ({"layout": "causal_padded", "batch_size": 2.5}, "batch_size, an integer >= 1, got 2.5"),
        ({"layout": "causal_padded", "batch_size": True}, "an integer >= 1, got True"),
        ({"rank": 0}, "give both rank and world_size"),
        ({"rank": 2, "world_size": 2}, "need 0 <= rank < world_size"),
        ({"batch_max_length": 0}, "batch_max_length must be an integer >= 1, got 0"),
        ({"batch_max_length": "96"}, "batch_max_length must be an integer >= 1, got '96'"),
        ({"batch_max_length": 96.7}, "batch_max_length must be an integer >= 1, got 96.7"),
    ],
)
def test_bad_settings(folder: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SampledDataset(folder, **kwargs)


def test_an_empty_sample_loads_and_yields_nothing(tmp_path: Path) -> None:
    # `data_io sample allow_empty=true` publishes one on purpose: not "lower world_size".
    path = write_sampled(tmp_path / "s", n_rows=0, epochs=1).path
    assert list(SampledDataset(path)) == []
    assert list(SampledDataset(path, layout="causal_padded", batch_size=1)) == []


def test_whole_number_floats_are_taken_as_the_integers(folder: Path) -> None:
    # 4096 / 2 in a script, or 2048.0 in YAML: an integer; 96.7 is refused above.
    assert SampledDataset(folder, batch_max_length=128.0).batch_max_length == 128
    padded = SampledDataset(folder, layout="causal_padded", batch_size=2.0)
    assert padded.batch_size == 2 and isinstance(padded.batch_size, int)


# -- provenance: what the sampler's metadata promises about the folder -----------------------


def add_marker(folder: Path, epochs: int = 2) -> None:
    """Give a fixture folder the keys this project's sampler writes beside its marker."""
    tokens = np.load(folder / "tokens.npy", mmap_mode="r")
    edit_meta(
        folder,
        data_io={"inputs": "f" * 64, "config": {"seed": 4, "epochs": epochs}, "code": "0.1.0+x"},
        epochs=epochs,
        rows_per_epoch=len(load_index(folder, "inst_len")),
        num_tokens=len(tokens),
        token_dtype=tokens.dtype.name,
    )


def test_marked_folder_loads(folder: Path) -> None:
    add_marker(folder)
    ds = SampledDataset(folder, epoch=1, batch_max_length=128)
    assert ds.metadata.seed == 4 and ds.identity.kind == "marker"
    assert ds.num_steps() > 0


def test_token_dtype_too_narrow_for_the_vocabulary(tmp_path: Path) -> None:
    # No marker needed: the vocabulary size is in every metadata.json.
    path = write_sampled(tmp_path / "s", n_rows=20, dtype="uint8", vocab_size=256).path
    SampledDataset(path, batch_max_length=128)  # largest id 255 fits uint8
    edit_meta(path, tokenizer_info={"tokenizer_path": "x", "vocab_size": 257})
    with pytest.raises(
        InputError,
        match=r"tokens\.npy: dtype uint8 holds ids up to 255, but tokenizer_info\.vocab_size "
        r"in metadata\.json is 257 \(largest id 256\).*re-run `data_io sample`",
    ):
        SampledDataset(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"token_dtype": "int32"}, r"dtype uint16, but metadata.json says the sampler wrote int32"),
        ({"num_tokens": 10}, r"tokens\.npy: \d+ tokens, but .* wrote 10; the file is truncated"),
        ({"rows_per_epoch": 41}, r"epoch_0: 40 rows in each index array, but .* wrote 41"),
        ({"epochs": 0}, r"key 'epochs' must be >= 1"),
        ({"epochs": None}, r"key 'epochs' must be an integer, got None; re-run"),
        ({"token_dtype": 16}, r"key 'token_dtype' must be a dtype name"),
        ({"data_io": "yes"}, r"'data_io' block must be an object with keys inputs, config, code"),
        ({"data_io": {"inputs": "x"}}, r"'data_io' block must be an object"),
    ],
)
def test_marked_folder_disagrees_with_its_files(folder: Path, changes: dict, message: str) -> None:
    add_marker(folder)
    edit_meta(folder, **changes)
    with pytest.raises(InputError, match=message):
        SampledDataset(folder)


def test_epoch_lost_after_sampling_is_not_a_missing_epoch(folder: Path) -> None:
    add_marker(folder)
    # Asking beyond what was sampled: the sampler's epochs= is what to change.
    with pytest.raises(InputError, match=r"epoch 2 was not sampled .* epochs=3"):
        SampledDataset(folder, epoch=2)
    shutil.rmtree(folder / "epoch_1")
    # Lost after sampling: found when the loader is made, whichever epoch it is made for (a
    # training run would otherwise stop at epoch 1, hours in).
    for epoch in (0, 1, 2):
        with pytest.raises(
            InputError,
            match=rf"{folder.name}: epoch_1 missing, though metadata\.json says epochs 0\.\.1 "
            r"were sampled; the folder is incomplete",
        ):
            SampledDataset(folder, epoch=epoch)
    # open_epoch's own message, for the readers that open one epoch without a loader.
    meta = read_metadata(folder)
    with pytest.raises(InputError, match=r"epoch_1: missing, .*\(present: 0\)"):
        open_epoch(folder, 1, int(open_tokens(folder).shape[0]), meta)


def test_rows_per_epoch_checked_in_every_epoch(folder: Path) -> None:
    add_marker(folder)
    for name in ("inst_start", "inst_len", "resp_start", "resp_len"):
        edit_index(folder, name, load_index(folder, name, epoch=1)[:30], epoch=1)
    SampledDataset(folder, epoch=0)
    with pytest.raises(InputError, match=r"epoch_1: 30 rows .* wrote 40 per epoch"):
        SampledDataset(folder, epoch=1)
    ds = SampledDataset(folder, epoch=0)
    with pytest.raises(InputError, match=r"epoch_1: 30 rows"):
        ds.set_epoch(1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"layout": "causal_padded", "batch_size": 41},
            r"has 40 rows, fewer than one step of batch_size 41 x world_size 1 = 41, so it yields "
            r"no batch; lower batch_size",
        ),
        (
            {"layout": "causal_padded", "batch_size": 14, "rank": 0, "world_size": 3},
            r"fewer than one step of batch_size 14 x world_size 3 = 42",
        ),
        (
            {"batch_max_length": 10**5},
            r"has 40 rows \(\d+ tokens\) that all fit one step of world_size 1 x batch_max_length "
            r"100000, and the step that reaches the end of the epoch is dropped \(drop_last\)",
        ),
        ({"rank": 0, "world_size": 41}, r"has 40 rows for world_size 41 ranks.*lower world_size"),
    ],
)
def test_settings_that_leave_the_epoch_without_a_batch_are_refused(
    folder: Path, kwargs: dict, message: str
) -> None:
    """A batch larger than the epoch used to give an epoch of no batches, without a word."""
    with pytest.raises(ConfigError, match=message):
        SampledDataset(folder, epoch=1, **kwargs)


def test_one_step_holding_the_whole_epoch_is_kept_without_drop_last(folder: Path) -> None:
    dataset = SampledDataset(folder, batch_max_length=10**5, drop_last=False)
    (batch,) = list(dataset)
    assert int(batch["numseqs"]) == 40
    padded = SampledDataset(folder, layout="causal_padded", batch_size=40)
    assert [b["input_ids"].shape[0] for b in padded] == [40]
