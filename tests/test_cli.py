"""The ``data_io`` command line: sub-commands, exit codes, summaries and error messages."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import data_io.cli as cli_module
from data_io.cli import build_parser, main, parse_command_line
from data_io.errors import OutputError
from data_io.sampling.cli import main as sample_main
from data_io.util.closed_stdout import EXIT_CLOSED_STDOUT, exit_quietly_on_closed_stdout
from tests.conftest import EXAMPLE_ROWS

REPO = Path(__file__).resolve().parent.parent


def test_every_stage_has_a_subcommand():
    choices = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"clean", "train-tokenizer", "tokenize", "sample", "example"} <= set(choices)


def test_positional_arguments_may_follow_options():
    """argparse fills a list positional from the arguments before the first option only; the
    command line reads the later ones too, in the order typed."""
    args = parse_command_line(["prepare", "a.txt", "-o", "out", "b.txt", "--threads", "1", "c"])
    assert args.inputs == ["a.txt", "b.txt", "c"] and args.threads == 1
    args = parse_command_line(["sample", "epochs=2", "-q", "seed=3"])
    assert args.overrides == ["epochs=2", "seed=3"] and args.quiet
    args = parse_command_line(["loader-check", "c.toml", "data.seed=1", "--rank", "2", "data.x=3"])
    assert args.overrides == ["data.seed=1", "data.x=3"] and args.rank == 2
    # KempnerForge's dotted options still mix with them.
    args = parse_command_line(["loader-check", "c.toml", "--data.a=1", "data.b=2"])
    assert args.overrides == ["--data.a=1", "data.b=2"]
    # After `--`, a file name that starts with a dash is an input too.
    args = parse_command_line(["prepare", "a.txt", "-o", "out", "--", "-b.txt", "c"])
    assert args.inputs == ["a.txt", "-b.txt", "c"]
    with pytest.raises(SystemExit):  # one positional too many is still argparse's error
        parse_command_line(["inspect", "a", "--documents", "2", "b"])


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--workers", "0"),
        ("--threads-per-unit", "0"),
        ("--unit-mb", "-5"),
        ("--unit-mb", "0"),
        ("--unit-mb", "nan"),
        ("--unit-mb", "inf"),  # was a traceback (no int of infinity) once the plan was cut
        ("--unit-mb", "1e-9"),  # under a byte: was "the unit size must be positive, not 0 bytes"
    ],
)
def test_scale_out_counts_below_one_are_refused(option: str, value: str, capsys):
    """0 was taken for "the default" (workers, threads) or "do not cut" (unit size); a unit size
    must also be finite and one byte or more."""
    with pytest.raises(SystemExit):
        parse_command_line(["prepare", "a.txt", "-o", "out", "--executor", "local", option, value])
    assert f"argument {option}: must be" in capsys.readouterr().err


def test_an_unknown_option_gets_the_commands_usage_and_key_value_hint(capsys):
    with pytest.raises(SystemExit):
        parse_command_line(["status", "plan", "--workers", "2"])
    err = capsys.readouterr().err
    assert err.startswith("usage: data_io status") and "unrecognized arguments: --workers 2" in err
    with pytest.raises(SystemExit):
        parse_command_line(["sample", "--epochs=2"])
    err = capsys.readouterr().err
    assert err.startswith("usage: data_io sample")
    assert "settings are key=value arguments without dashes: epochs=2" in err
    with pytest.raises(SystemExit):
        parse_command_line(["sample", "--verbose"])  # not a setting: no hint to make one up
    assert "without dashes" not in capsys.readouterr().err


def test_a_units_thread_count_below_one_is_refused(capsys):
    with pytest.raises(SystemExit):
        parse_command_line(["scale", "unit", "plan.json", "u000000", "--threads", "0"])
    assert "argument --threads: must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--val-fraction", "2", "--val-fraction must be a number in [0, 1), got 2.0"),
        ("--tokens-per-shard", "0", "--tokens-per-shard must be an integer >= 1, got 0"),
        ("--min-doc-chars", "-1", "--min-doc-chars must be an integer >= 0, got -1"),
        ("--seed", "-1", "--seed must be an integer >= 0, got -1"),
        ("--eos-token", "nope", "--eos-token 'nope' does not apply to the char tokenizer"),
    ],
)
def test_an_options_bad_value_is_named_as_the_option_not_the_api_parameter(
    tmp_path: Path, capsys, option: str, value: str, said: str
):
    (tmp_path / "a.txt").write_text("a document long enough to be kept\n")
    argv = ["prepare", str(tmp_path / "a.txt"), "-o", str(tmp_path / "out"), "--tokenizer", "char"]
    assert main([*argv, option, value]) == 1
    assert f"data_io prepare: error: {said}" in capsys.readouterr().err


def test_option_words_leave_paths_and_api_hints_alone():
    from data_io.cli import _in_option_words

    names = {"val_fraction": "--val-fraction", "seed": "--seed", "text_field": "--text-field"}
    assert (
        _in_option_words(
            "/data/val_fraction/x: seed val_fraction; pass text_field= it; 'text_field/a'", names
        )
        == "/data/val_fraction/x: seed --val-fraction; pass text_field= it; 'text_field/a'"
    )
    assert _in_option_words("seed must be >= 0", names) == "--seed must be >= 0"
    # A list of options that differ names each as the command line does, one-word ones too.
    names["dedup"] = "--dedup"
    assert (
        _in_option_words(
            "other options (dedup: 'line' then, 'doc' now; seed: 1 then, 2 now)", names
        )
        == "other options (--dedup: 'line' then, 'doc' now; --seed: 1 then, 2 now)"
    )
    # A file named after an option stays a file name; the option at a sentence's end is one.
    names["prefix_config"] = "--prefix-config"
    assert (
        _in_option_words("ships prefix_config.yaml; set prefix_config.", names)
        == "ships prefix_config.yaml; set --prefix-config."
    )


def test_sample_tokenized_reads_key_values_around_its_options(tmp_path: Path, capsys):
    assert sample_main([f"tokenized_path={tmp_path / 'nowhere'}", "-q", "epochs=2"]) == 1
    # Before: argparse's "unrecognized arguments: epochs=2" (exit 2); now the config's own check.
    assert "nowhere' is not a directory" in capsys.readouterr().err


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
    assert "skipped 1 bad row:" in out and "line 2" in out


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


# -- the top level: --version, --help, a closed stdout --------------------------------------


def test_version_prints_the_package_version(capsys):
    import data_io

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"data_io {data_io.__version__}"
    assert data_io.__version__[0].isdigit()


def test_version_falls_back_without_installed_metadata(monkeypatch):
    import importlib.metadata

    import data_io

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.delitem(data_io.__dict__, "__version__", raising=False)
    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert data_io.__getattr__("__version__") == data_io._SOURCE_VERSION
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        data_io.__getattr__("nope")


def test_help_describes_commands_and_example_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "--version" in top and "COMMAND --help" in top
    with pytest.raises(SystemExit):
        main(["example", "--help"])
    example = " ".join(capsys.readouterr().out.split())  # undo argparse's line wrapping
    assert "--workdir WORKDIR folder for every output" in example
    assert "(default: work/example)" in example


def _help_entries(parser, path=()):
    """(command words, option strings, help as printed) of every argument of every command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield from _help_entries(command, (*path, name))
        elif not isinstance(action, argparse._HelpAction) and action.help != argparse.SUPPRESS:
            shown = parser._get_formatter()._expand_help(action) if action.help else ""
            yield " ".join(path), action.option_strings or [action.dest], shown


def test_every_help_gives_each_options_default():
    """The README's promise: every `--help` describes each option, with its default (or says
    that it is required); a positional argument is described."""
    missing = []
    for command, names, shown in _help_entries(build_parser()):
        if names == ["--version"]:
            continue
        is_option = names[0].startswith("-")
        if not shown or (is_option and "default" not in shown and "required" not in shown):
            missing.append(f"{command} {names}: {shown!r}")
    assert not missing, "\n".join(missing)


def test_prepare_and_finalize_help_name_their_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    prepare = " ".join(capsys.readouterr().out.split())
    for words in ("--no-normalize skip NFC and whitespace clean-up (default: off",
                  "--hf-config HF_CONFIG config of a Hub dataset (default: none",
                  "--tokens_per_shard N = --tokens-per-shard (default: 10000000)",
                  "--no_dedup = --no-dedup (default: off)"):  # fmt: skip
        assert words in prepare
    with pytest.raises(SystemExit):
        main(["scale", "finalize", "--help"])
    finalize = " ".join(capsys.readouterr().out.split())
    assert "manifest the plan: OUT/.data_io_scale/manifest.json" in finalize
    assert "-q, --quiet no progress or summary (default: off)" in finalize


def test_resume_help_gives_the_plans_defaults(capsys):
    """`resume` runs on the settings its plan recorded (resume_settings), so its --help must not
    give a first run's defaults ("run in this process, no plan", one worker per 4 cores)."""
    with pytest.raises(SystemExit):
        main(["resume", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "no plan" not in shown and "one per 4 cores" not in shown
    assert "(default: the executor the plan recorded)" in shown
    assert "--workers WORKERS local: worker processes (default: the number the plan" in shown
    assert "refused by resume: the plan's units are cut already" in shown


def test_resume_refuses_a_unit_size(tmp_path, capsys):
    """Taken and ignored, --unit-mb would look like it cut the plan's units anew."""
    assert main(["resume", str(tmp_path / "no-plan"), "--unit-mb", "4"]) != 0
    err = capsys.readouterr().err
    assert "resume runs the plan's units as they were cut; --unit-mb cannot change them" in err
    assert "run the command that made the plan again with --unit-mb" in err


def run_with_closed_stdout(*argv: str) -> subprocess.CompletedProcess:
    """Run a command whose stdout is a pipe nobody reads any more (as after `| head -1`)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the child writes: every write fails, no timing involved
    try:
        return subprocess.run(
            [sys.executable, *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "argv",
    [
        ("-m", "data_io", "clean", "--list"),
        ("-m", "data_io", "--help"),
        ("-m", "data_io", "--version"),
        ("-m", "pipe.clean_gsm8k_train", "--help"),
        ("sample_tokenized.py", "--help"),
    ],
)
def test_closed_stdout_ends_quietly(argv):
    done = run_with_closed_stdout(*argv)
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"
    # 141 when the closed pipe was noticed (128 + SIGPIPE, as a shell reports `yes | head`),
    # 0 when argparse already swallowed the failed write of --help.
    assert done.returncode in (0, EXIT_CLOSED_STDOUT)


def test_clean_list_into_closed_pipe_exits_141():
    assert run_with_closed_stdout("-m", "data_io", "clean", "--list").returncode == 141


def test_tokenize_summary_into_closed_pipe_exits_141(tmp_path: Path, small_tokenizer: Path):
    """The rich summary too: rich's own broken-pipe handling would exit 1 instead."""
    done = run_with_closed_stdout(
        "-m",
        "data_io",
        "tokenize",
        str(EXAMPLE_ROWS / "data"),
        "-o",
        str(tmp_path / "tok"),
        "--tokenizer-path",
        str(small_tokenizer),
    )
    assert done.returncode == EXIT_CLOSED_STDOUT, done.stderr
    assert "Traceback" not in done.stderr
    # The work itself was done and published before the summary was printed.
    assert (tmp_path / "tok" / "tokenizer_info.json").is_file()


def test_closed_stdout_guard_sees_wrapped_pipe_errors(capsys):
    def wrapped() -> int:
        try:
            raise BrokenPipeError(32, "Broken pipe")
        except BrokenPipeError as exc:
            raise OutputError("writing the report failed") from exc

    assert exit_quietly_on_closed_stdout(wrapped) == EXIT_CLOSED_STDOUT
    assert exit_quietly_on_closed_stdout(lambda: 3) == 3

    def other_error() -> int:
        raise OutputError("disk full")

    with pytest.raises(OutputError, match="disk full"):  # other errors are not swallowed
        exit_quietly_on_closed_stdout(other_error)
    assert capsys.readouterr().err == ""


def test_ctrl_c_while_starting_exits_130_without_a_traceback(monkeypatch, capsys):
    # Ctrl-C in the first second of `data_io clean ...`, while the stage's modules import.
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_module, "parse_command_line", interrupted)
    assert main(["clean", "--all"]) == 130
    assert capsys.readouterr().err == "data_io: interrupted while starting\n"
