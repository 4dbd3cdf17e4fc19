"""What ``data_io tokenize`` and ``train-tokenizer`` print: the summary, --quiet, --help."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from data_io.cli import build_parser, main
from data_io.tokenize import tokenize
from data_io.tokenize.summary import print_summary

GOOD = json.dumps({"condition": "cot", "instruction": "What is 2+2?", "response": "4"})


def summary_text(result) -> str:
    buffer = io.StringIO()
    print_summary(result, Console(file=buffer, width=200, highlight=False, soft_wrap=True))
    return buffer.getvalue()


def bad_rows_folder(tmp_path: Path) -> Path:
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "bad.jsonl").write_text(f"{GOOD}\n{{oops\n{GOOD}\n[1]\n")
    (rows / "notes.txt").write_text("not rows")
    return rows


def test_an_unchanged_file_keeps_its_bad_row_examples(small_tokenizer: Path, tmp_path: Path):
    rows = bad_rows_folder(tmp_path)
    kwargs = {"tokenizer_path": small_tokenizer, "on_error": "skip", "progress": False}
    first = tokenize([rows], tmp_path / "out", **kwargs)
    again = tokenize([rows], tmp_path / "out", **kwargs)
    (report,) = again.files
    assert report.status == "unchanged" and report.bad_rows == 2
    assert report.bad_row_examples == first.files[0].bad_row_examples
    text = summary_text(again)
    assert f"bad.jsonl: 2 (first: {rows / 'bad.jsonl'}:line 2: malformed JSON" in text
    assert "(first: )" not in text


def test_the_summary_lists_skipped_files_kept_tasks_and_uses_megabytes(
    small_tokenizer: Path, tmp_path: Path
):
    rows = bad_rows_folder(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "elsewhere.jsonl").write_text(GOOD + "\n")
    out = tmp_path / "out"
    tokenize([other], out, tokenizer_path=small_tokenizer, progress=False)
    result = tokenize([rows], out, tokenizer_path=small_tokenizer, on_error="skip", progress=False)
    text = summary_text(result)
    assert "skipped 1 input file that is not .jsonl" in text
    assert str(rows / "notes.txt") in text
    assert "kept 1 task folder not in this run's inputs:" in text
    assert "elsewhere.jsonl (its source" in text
    assert " MB " in text and "MiB" not in text


def test_a_mixed_folder_is_said_loudly_with_the_repair_command(
    small_tokenizer: Path, tmp_path: Path
):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(GOOD + "\n")
    (rows / "b.jsonl").write_text(GOOD + "\n")
    out = tmp_path / "out"
    tokenize([rows], out, tokenizer_path=small_tokenizer, progress=False)
    (rows / "b.jsonl").write_text("{oops\n")
    result = tokenize(
        [rows], out, tokenizer_path=small_tokenizer, token_dtype="auto", progress=False, check=False
    )
    text = summary_text(result)
    assert "is MIXED: 1 task folder does not match" in text
    assert "b.jsonl (tokenized with other layout options)" in text
    assert result.repair_command in text and "--token-dtype auto" in result.repair_command


def test_quiet_prints_nothing_on_success(
    small_tokenizer: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
):
    rows = bad_rows_folder(tmp_path)
    argv = ["tokenize", str(rows), "-o", str(tmp_path / "out")]
    argv += ["--tokenizer-path", str(small_tokenizer), "--on-error", "skip", "-q"]
    assert main(argv) == 0
    assert capfd.readouterr() == ("", "")
    # Without --quiet the same run prints its summary.
    assert main(argv[:-1]) == 0
    assert "bad.jsonl: 2 (first:" in capfd.readouterr().out


@pytest.mark.parametrize("command", ["tokenize", "train-tokenizer"])
def test_help_describes_every_option_with_its_default(command: str):
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.choices and command in a.choices)
    sub = subparsers.choices[command]
    for action in sub._actions:
        if not action.option_strings or action.dest == "help":
            continue
        assert action.help, f"{command} {action.option_strings} has no description"
        assert re.search(r"default|required", action.help), (
            f"{command} {action.option_strings}: the help does not say its default"
        )


def test_the_summary_names_the_encoder_and_why_hf_runs(
    small_tokenizer: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(GOOD + "\n")
    fast = tokenize([rows], tmp_path / "fast", tokenizer_path=small_tokenizer, progress=False)
    assert fast.encoder == "fast-bpe" and fast.encoder_fallback is None
    assert "encoder: fast-bpe\n" in summary_text(fast)
    monkeypatch.setenv("DATA_IO_ENCODER", "hf")
    forced = tokenize([rows], tmp_path / "hf", tokenizer_path=small_tokenizer, progress=False)
    assert forced.encoder == "hf-tokenizers"
    assert "encoder: hf-tokenizers (DATA_IO_ENCODER=hf)" in summary_text(forced)
    for task in ("a.jsonl",):  # the same bytes either way
        for name in ("tokens", "inst_start", "inst_len", "resp_start", "resp_len"):
            one, two = (tmp_path / d / task / f"{name}.npy" for d in ("fast", "hf"))
            assert one.read_bytes() == two.read_bytes(), name


def test_long_task_names_are_whole_and_verbose_lists_every_file(
    small_tokenizer: Path, tmp_path: Path
):
    rows = tmp_path / "rows"
    rows.mkdir()
    names = [f"a_rather_long_task_name_that_a_narrow_terminal_would_cut_{i:02d}" for i in range(20)]
    for name in names:
        (rows / f"{name}.jsonl").write_text(GOOD + "\n")
    result = tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)

    def printed(verbose: bool) -> str:
        buffer = io.StringIO()
        print_summary(result, Console(file=buffer, width=80, highlight=False), verbose=verbose)
        lines = buffer.getvalue().splitlines()
        # The task column's pieces, folded over several lines, joined up again.
        tasks = "".join(line.split("│")[0].strip() for line in lines if "│" in line)
        return tasks + re.sub(r"\s+", "", buffer.getvalue())

    short, full = printed(False), printed(True)
    assert sum(name in short for name in names) == 15
    assert "...and5more(--verboseliststhemall)" in short
    assert all(name in full for name in names) and "more(--verbose" not in full
    assert "…" not in short and "…" not in full


def test_a_declined_tokenizer_is_not_reported_as_a_broken_file(small_tokenizer, tmp_path):
    """A unigram tokenizer is fine; the summary says the fast encoder does not cover it."""
    import dataclasses

    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(GOOD + "\n")
    result = tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    unigram = dataclasses.replace(
        result, encoder="hf-tokenizers", encoder_fallback="a Unigram model, not BPE"
    )
    text = summary_text(unigram)
    assert "this tokenizer has a Unigram model, not BPE" in text
    assert "the same ids" in text and "the file is fine" in text
