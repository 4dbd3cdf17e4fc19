"""The embedded example's raw inputs: up to date with their generator, and cleanable."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from data_io.cli import main

from .make_example_raw import DEFAULT, build
from .upstream import read_jsonl, read_parquet


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_committed_copy_matches_the_generator(tmp_path: Path) -> None:
    build(tmp_path)
    assert _files(DEFAULT) == _files(tmp_path)


def test_all_cleaners_run_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(DEFAULT, tmp_path / "raw_data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["clean", "--all"]) == 0
    summary = capsys.readouterr().out
    for name in ("gsm8k_train", "arb", "flan", "ampsmathematica"):
        assert f"{name}: " in summary
    assert "dropped" not in summary.replace("0 records dropped", "")
    gsm8k = read_jsonl(tmp_path / "data" / "gsm8k_train.jsonl")
    assert len(gsm8k) == 40 and all(
        row["condition"] == "direct" and row["response"].lstrip("-").isdigit() for row in gsm8k
    )
    assert len(list((tmp_path / "data" / "Platypus").glob("arb_*.jsonl"))) == 5
    flan = sorted(p.name for p in (tmp_path / "data_clustered" / "flan").iterdir())
    assert flan == [
        "cot_zsopt_data__cot_esnli.parquet",
        "cot_zsopt_data__cot_gsm8k.parquet",
        "flan_zsopt_data__anli_r1_0.1.0.parquet",
        "flan_zsopt_data__glue_sst2_2.0.0.parquet",
        "niv2_zsopt_data__task001_quoref_question_generation.parquet",
        "niv2_zsopt_data__task1391_winogrande_easy_answer_generation.parquet",
    ]
    amps = tmp_path / "data_clustered" / "ampsmathematica"
    assert sorted(p.name for p in amps.iterdir()) == [
        "algebra_linear_equations.parquet",
        "calculus_derivatives_w_steps.parquet",
    ]
    assert {
        row["condition"] for row in read_parquet(amps / "calculus_derivatives_w_steps.parquet")
    } == {"noisy,cot"}
