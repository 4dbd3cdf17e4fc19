"""The ``data_io`` command line: sub-commands, exit codes, summaries and error messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_io.cli import build_parser, main
from tests.conftest import EXAMPLE_ROWS


def test_every_stage_has_a_subcommand():
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"clean", "train-tokenizer", "tokenize", "sample", "example"} <= set(choices)


def test_tokenize_prints_a_summary_and_is_incremental(
    small_tokenizer: Path, tmp_path: Path, capsys
):
    args = [
        "tokenize",
        str(EXAMPLE_ROWS),
        "-o",
        str(tmp_path / "out"),
        "--tokenizer-path",
        str(small_tokenizer),
    ]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "6 files: 6 tokenized, 0 unchanged, 0 failed" in first
    assert "data__arithmetic.jsonl" in first and "new" in first
    assert main(args) == 0
    assert "6 files: 0 tokenized, 6 unchanged, 0 failed" in capsys.readouterr().out
    assert main([*args, "--quiet"]) == 0
    assert capsys.readouterr().out == ""


def test_tokenize_options_reach_the_engine(small_tokenizer: Path, tmp_path: Path, capsys):
    args = [
        "tokenize",
        str(EXAMPLE_ROWS),
        "-o",
        str(tmp_path / "out"),
        "--tokenizer-path",
        str(small_tokenizer),
        "--token-dtype",
        "auto",
        "--threads",
        "1",
        "--conditions",
        "direct=<think>,cot=</think>,noisy=<|PAD|>,synth=<|endoftext|>",
        "-q",
    ]
    assert main(args) == 0
    info = json.loads((tmp_path / "out" / "tokenizer_info.json").read_text())
    assert info["token_dtype"] == "uint16"
    assert info["condition_mapping"] == {
        "direct": "<think>",
        "cot": "</think>",
        "noisy": "<|PAD|>",
        "synth": "<|endoftext|>",
    }


def test_tokenize_failure_exits_non_zero_naming_file_and_line(
    small_tokenizer: Path, tmp_path: Path, capsys
):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "bad.jsonl").write_text(
        '{"condition": "cot", "instruction": "a", "response": "b"}\n{oops\n'
    )
    args = [
        "tokenize",
        str(rows),
        "-o",
        str(tmp_path / "out"),
        "--tokenizer-path",
        str(small_tokenizer),
    ]
    assert main(args) == 1
    captured = capsys.readouterr()
    assert f"{rows / 'bad.jsonl'}:line 2: malformed JSON" in captured.err
    assert "failed" in captured.out  # the summary still printed
    assert main([*args, "--on-error", "skip"]) == 0
    out = capsys.readouterr().out
    assert "skipped 1 bad row(s)" in out and "line 2" in out


def test_bad_arguments_are_usage_errors(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["tokenize", str(tmp_path), "-o", str(tmp_path / "o"), "--on-error", "ignore"])
    assert info.value.code == 2
    assert main(["tokenize", str(tmp_path), "-o", str(tmp_path / "o"), "--conditions", "oops"]) == 1
    assert "not TAG=TOKEN" in capsys.readouterr().err


def test_train_tokenizer_command(tmp_path: Path, capsys):
    out = tmp_path / "tok" / "tokenizer.json"

    def train(vocab_size: int) -> int:
        arguments = ["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out)]
        return main([*arguments, "--vocab-size", str(vocab_size), "--prefix-config", "none"])

    assert train(400) == 0
    assert "vocab 400" in capsys.readouterr().out
    assert out.is_file() and (out.parent / "config.json").is_file()
    assert train(10) == 1
    assert "too small" in capsys.readouterr().err
