"""data_io.load.cli: what pack and loader-check say."""

from __future__ import annotations

import itertools
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from data_io.cli import main
from tests.load.rows_fixture import random_rows, write_rows


def test_pack_names_the_config_key_dataset_prepared_path_as_the_config_spells_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The list of [data] keys said --dataset-prepared-path (the option's spelling, put there
    by the command line's rewriting of parameter names), a key no config can have."""
    write_rows(tmp_path / "sft.jsonl", random_rows(1, 10, longest=20))
    config = {"data": {"datasets": [{"path": str(tmp_path / "sft.jsonl"), "type": "tokenized"}]}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    code = main(["pack", str(tmp_path / "c.yaml"), "data.nope=1", "--dataset-prepared-path",
                 str(tmp_path / "cache")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "unknown key data.nope" in err
    assert ", dataset_prepared_path," in err and "--dataset-prepared-path" not in err
    code = main(["pack", str(tmp_path / "c.yaml"), "--dataset-prepared-path",
                 str(tmp_path / "cache")])  # fmt: skip
    assert code == 0 and [p.name for p in (tmp_path / "cache").iterdir()]


def _packed_rows_config(tmp_path: Path, rows: int, **data: object) -> Path:
    """``c.yaml``: ``rows`` random rows packed sequentially into bins of 64, 4 a batch."""
    write_rows(tmp_path / "sft.jsonl", random_rows(1, rows, longest=30))
    config = {
        "data": {
            "datasets": [{"path": str(tmp_path / "sft.jsonl"), "type": "tokenized"}],
            "sample_packing_method": "sequential",
            "sample_packing_sequence_len": 64,
            "num_workers": 0,
            **data,
        },
        "train": {"batch_size": 4},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    return tmp_path / "c.yaml"


def test_loader_check_rates_packed_rows_by_the_tokens_of_their_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rate multiplied train.seq_len (default 2048) by the batch size, whatever the items'
    length: bins of 64 tokens were counted as 2048, a rate 32 times too high."""
    from data_io.load import check
    from data_io.load.config import load_config

    _packed_rows_config(tmp_path, 200, dataset_prepared_path=str(tmp_path / "cache"))
    loaded = load_config(tmp_path / "c.yaml")
    assert loaded.train.seq_len == 2048  # the default, which packed rows do not use
    # A clock that moves one second per reading: each batch takes one second.
    monkeypatch.setattr(check, "time", SimpleNamespace(perf_counter=itertools.count().__next__))
    report = check.check_loader(loaded, batches=3)
    assert report["batch_shapes"]["input_ids"] == [4, 64]
    assert report["tokens_per_second_after_first"] == 4 * 64


@pytest.mark.parametrize(
    ("value", "code"), [("1000000000000", 1), ("2147483648", 1), ("2147483647", 0)]
)
def test_pack_refuses_a_bin_longer_than_the_limit_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, code: int
) -> None:
    """sample_packing_sequence_len=10**12 was packed (one bin, fill ratio 0.0000) and the
    loader then failed allocating its first item; the limit itself is packed."""
    config = _packed_rows_config(tmp_path, 10, dataset_prepared_path=str(tmp_path / "cache"))
    override = f"data.sample_packing_sequence_len={value}"
    assert main(["pack", str(config), override]) == code
    err = capsys.readouterr().err
    if code:
        assert f"data.sample_packing_sequence_len={value} is more than 2147483647" in err
        assert not (tmp_path / "cache").exists()  # refused before any plan is written
    else:
        assert err == ""


def test_loader_check_help_states_each_default_once(capsys: pytest.CaptureFixture[str]) -> None:
    """The help said "(default: None)" of the overrides and --workers, and "--json ...
    (default: off: as text) (default: False)"; --batches x said "invalid _at_least_one value"."""
    with pytest.raises(SystemExit):
        main(["loader-check", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in shown and "(default: False)" not in shown
    assert "(default: off: as text)" in shown and "(default: 5)" in shown
    with pytest.raises(SystemExit) as stop:
        main(["loader-check", "job.toml", "--batches", "x"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "argument --batches: 'x' is not an integer" in err


def test_loader_check_turns_a_wide_sources_table_and_says_when_the_epoch_ends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A packed rows source has 17 keys: a column each folded them into a letter or two at 80
    columns. The header named train.seq_len for items that are bins; --batches 100 timed the
    epoch's few batches without saying so."""
    _packed_rows_config(tmp_path, 40)
    assert main(["loader-check", str(tmp_path / "c.yaml"), "--batches", "100"]) == 0
    out = capsys.readouterr().out
    assert "batch 4 x items of 64 tokens (train.seq_len 2048 does not set them)" in out
    # A row per key: the key and its value on one line.
    assert any("sample packing sequence len" in line and "64" in line for line in out.splitlines())
    steps = next(line for line in out.splitlines() if line.startswith("epoch:"))
    timed = int(steps.split("this rank: ")[1].split(" steps")[0])
    assert f"{timed} batches timed: this rank's epoch ends there" in out
