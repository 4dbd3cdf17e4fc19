"""``data_io train-tokenizer --executor local``: each file's counting pass is a unit; the
finalize step merges the units' counts and runs the merge pass. The tokenizer is byte-identical
to one run in one process, a unit that did not run is counted at finalize, and resume reuses the
units that did."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from data_io.cli import main
from data_io.errors import ConfigError
from data_io.scale.manifest import Manifest
from data_io.scale.status import status
from data_io.stage import load_stage
from data_io.tokenizer.train import train_tokenizer
from tests.scale.inputs import tree_bytes, write_inputs

VOCAB = "800"


def _args(inputs: Path, out: Path, *extra: str) -> list[str]:
    return ["train-tokenizer", str(inputs), "-o", str(out / "tokenizer.json"), "--vocab-size",
            VOCAB, "--prefix-config", "none", "-q", *extra]  # fmt: skip


def _one_run(inputs: Path, out: Path, tokenizer_type: str = "bpe") -> dict[str, bytes]:
    train_tokenizer([inputs], out / "tokenizer.json", vocab_size=int(VOCAB), prefix_config=None,
                    progress=False, tokenizer_type=tokenizer_type)  # fmt: skip
    return tree_bytes(out)


def test_local_executor_is_byte_identical_to_one_run(tmp_path: Path):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "scaled"
    assert main(_args(inputs, out, "--executor", "local", "--workers", "2")) == 0
    assert tree_bytes(out) == _one_run(inputs, tmp_path / "one")
    # A unigram vocabulary is learned from the same units' counts (it was refused here).
    uni = tmp_path / "scaled-unigram"
    argv = _args(
        inputs, uni, "--executor", "local", "--workers", "2", "--tokenizer-type", "unigram"
    )
    assert main(argv) == 0
    assert tree_bytes(uni) == _one_run(inputs, tmp_path / "one-unigram", "unigram")
    assert '"Unigram"' in (uni / "tokenizer.json").read_text()
    manifest = Manifest.load(out)
    assert manifest.stage == "train-tokenizer"
    assert sorted(u.task for u in manifest.units) == sorted(
        ["big.jsonl", "small.jsonl", "groups.parquet", "packed.jsonl.gz"]
    )
    assert status(manifest).finalized
    records = [manifest.read_record(u.id, "done") for u in manifest.units]
    assert sum(r["rows"] for r in records) == 3000 + 40 + 2000 + 500
    assert all(r["words"] > 0 and r["pieces"] >= r["words"] for r in records)
    # The parts went with the finalize.
    assert not (out / ".data_io_scale" / "parts").exists()


def test_a_unit_that_did_not_run_is_counted_at_finalize(tmp_path: Path):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "scaled"
    stage = load_stage("train-tokenizer")
    plan = stage.plan(
        {"inputs": [str(inputs)], "output": str(out / "tokenizer.json"),
         "train": {"vocab_size": int(VOCAB), "prefix_config": None}},
        unit_bytes=0,
    )  # fmt: skip
    manifest = Manifest.from_plan(plan)
    manifest.save()
    for unit in manifest.units[1:]:
        stage.run_unit(manifest, unit, threads=1)
    done = stage.finalize(manifest, missing=manifest.units[:1], progress=False)
    assert done.record["counted_here"] == [manifest.units[0].task]
    assert tree_bytes(out) == _one_run(inputs, tmp_path / "one")


def test_what_cannot_run_as_units_is_refused_before_anything_runs(tmp_path: Path, capsys):
    inputs = write_inputs(tmp_path / "in")
    out = tmp_path / "scaled"
    for extra, expected in (
        (["--trainer", "hf"], "hf trainer"),
        (["--counts", str(tmp_path / "c")], "--counts keeps"),
        (["--eval", str(inputs)], "--eval runs after"),
    ):
        assert main(_args(inputs, out, "--executor", "local", *extra)) == 1
        assert expected in capsys.readouterr().err
    assert not (out / "tokenizer.json").exists()
    with pytest.raises(ConfigError, match="no option"):
        load_stage("train-tokenizer").plan(
            {"inputs": [str(inputs)], "output": str(out / "t.json"), "train": {"nope": 1}}
        )
    shutil.rmtree(out, ignore_errors=True)
