"""The two entry points: `python sample_tokenized.py` and `data_io sample` (stdout = report)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_io.sampling.synthetic import random_task, write_corpus

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    rng = np.random.default_rng(2)
    return write_corpus(
        tmp_path / "tok",
        {"flan__cot_a.parquet": random_task(rng, 30), "flan__b.parquet": random_task(rng, 20)},
        vocab_size=300,
    )


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_entry_points_write_only_the_report_to_stdout(
    tmp_path: Path, corpus: Path, entry: list[str]
) -> None:
    out = tmp_path / "out"
    done = _run(*entry, f"tokenized_path={corpus}", f"output_path={out}", "epochs=2", "--progress")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("\n### Category Coverage Stats\n")
    assert "Sampling epochs" not in done.stdout and "Reading indices" in done.stderr
    # The repository's prefix_config.yaml applies: flan__cot_ before flan__, noted once.
    assert done.stderr.count("'flan__cot_' and also 'flan__'") == 1
    assert (out / "epoch_1" / "inst_start.npy").exists()
    again = _run(*entry, f"tokenized_path={corpus}", f"output_path={out}", "epochs=2", "-q")
    assert again.returncode == 0
    assert "reusing it" in again.stderr and "Reading indices" not in again.stderr


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_errors_exit_non_zero_with_the_key(tmp_path: Path, corpus: Path, entry: list[str]) -> None:
    done = _run(*entry, f"tokenized_path={corpus}", "epochz=3")
    assert done.returncode == 1
    assert "'epochz'" in done.stderr and done.stdout == ""
    done = _run(*entry, f"tokenized_path={tmp_path / 'missing'}")
    assert done.returncode == 1 and "'tokenized_path'" in done.stderr


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_dashed_settings_name_the_key_value_spelling(corpus: Path, entry: list[str]) -> None:
    done = _run(*entry, f"tokenized_path={corpus}", "--epochs=3")
    assert done.returncode == 2 and done.stdout == ""
    assert "unrecognized arguments: --epochs=3" in done.stderr
    assert "epochs=3" in done.stderr.split("unrecognized arguments: --epochs=3", 1)[1]
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("entry", "name"),
    [
        (["sample_tokenized.py"], "sample_tokenized.py"),
        (["-m", "data_io", "sample"], "data_io sample"),
    ],
)
def test_hydra_append_is_refused_and_a_repeated_key_takes_the_last(
    tmp_path: Path, corpus: Path, entry: list[str], name: str
) -> None:
    out = tmp_path / "out"
    done = _run(*entry, f"tokenized_path={corpus}", f"output_path={out}", "+epochs=10")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        f"{name}: error: argument '+epochs=10': settings are key=value, without Hydra's '+', "
        "'++' or '~' (every key exists, with a default): write epochs=10"
    )
    assert not out.exists()
    # A key given twice, on either side of an option (`data_io sample` reads them intermixed):
    # the last value, as the original's OmegaConf took it, with a note.
    overrides = ["epochs=2", "-q", "epochs=3"]
    done = _run(*entry, f"tokenized_path={corpus}", f"output_path={out}", *overrides)
    assert done.returncode == 0, done.stderr
    note = "sample: note: epochs is given 2 times (epochs=2, then epochs=3); the last is used"
    assert done.stderr.splitlines()[0] == note
    assert sorted(p.name for p in out.glob("epoch_*")) == ["epoch_0", "epoch_1", "epoch_2"]


def test_sample_tokenized_names_the_spelling_of_a_dashed_setting(corpus: Path) -> None:
    done = _run("sample_tokenized.py", "--seed", "3", f"tokenized_path={corpus}")
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        "sample_tokenized.py: error: unrecognized arguments: --seed; settings are key=value "
        "arguments without dashes: seed=3"
    )


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_help_describes_every_option_with_its_default(entry: list[str]) -> None:
    from data_io.sampling.config import CONFIG_KEYS, KEY_HELP

    done = _run(*entry, "--help")
    assert done.returncode == 0
    text = " ".join(done.stdout.split())  # argparse and textwrap rewrap the lines
    for shown in ("epochs=10", "short_truncated=drop", "reuse=true", "allow_empty=false"):
        assert f" {shown} " in text
    for key in CONFIG_KEYS:
        assert " ".join(KEY_HELP[key].split()) in text, key
    assert "-q, --quiet no progress bars (default: shown when stderr is a terminal" in text
    assert "--progress progress bars even when stderr is not a terminal" in text


def _screen(stream: str) -> list[str]:
    """What a terminal shows after ``stream``: carriage returns, newlines, cursor-up (the
    codes tqdm uses) and overwriting text."""
    lines, row, col = [""], 0, 0
    for token in re.findall(r"\x1b\[A|\r|\n|[^\r\n\x1b]+", stream):
        if token == "\r":
            col = 0
        elif token == "\n":
            row, col = row + 1, 0
            lines.extend([""] * (row + 1 - len(lines)))
        elif token == "\x1b[A":
            row = max(0, row - 1)
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return [line.rstrip() for line in lines]


def test_no_progress_bar_is_left_unfinished(tmp_path: Path, corpus: Path) -> None:
    """The epochs bar and the copy bar below it used to leave "Writing tokens: 0%" behind."""
    done = subprocess.run(
        [sys.executable, "sample_tokenized.py", f"tokenized_path={corpus}",
         f"output_path={tmp_path / 'o'}", "--progress"],
        cwd=ROOT, capture_output=True, timeout=300,
    )  # fmt: skip
    stderr = done.stderr.decode()  # bytes: text mode would turn every "\r" into "\n"
    assert done.returncode == 0, stderr
    assert "Writing tokens" in stderr  # the bars were drawn (forced: stderr is a pipe)
    screen = [line for line in _screen(stderr) if "%|" in line]
    assert screen and all("100%|" in line for line in screen), screen


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_no_progress_bar_when_stderr_is_not_a_terminal(
    tmp_path: Path, corpus: Path, entry: list[str]
) -> None:
    """stderr to a log file or a pipe: notes only, no bar redrawn hundreds of times."""
    done = subprocess.run(
        [sys.executable, *entry, f"tokenized_path={corpus}", f"output_path={tmp_path / 'o'}"],
        cwd=ROOT, capture_output=True, timeout=300,
    )  # fmt: skip
    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert (tmp_path / "o" / "tokens.npy").is_file()
    for bar in ("Reading indices", "Sampling epochs", "Writing tokens", "%|", "\r"):
        assert bar not in stderr, stderr


def test_quiet_and_progress_exclude_each_other(tmp_path: Path, corpus: Path) -> None:
    done = _run("sample_tokenized.py", f"tokenized_path={corpus}", "--quiet", "--progress")
    assert done.returncode == 2
    assert "not allowed with argument" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("entry", "name"),
    [(["sample_tokenized.py"], "sample_tokenized.py"), (["-m", "data_io"], "data_io")],
)
def test_version(entry: list[str], name: str) -> None:
    from data_io import __version__

    done = _run(*entry, "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{name} {__version__}\n"


@pytest.mark.parametrize("entry", [["sample_tokenized.py"], ["-m", "data_io", "sample"]])
def test_error_after_a_progress_bar_gets_its_own_line(
    tmp_path: Path, corpus: Path, entry: list[str]
) -> None:
    """stderr to a file: the error used to follow a half-drawn "Reading indices: 0%" bar on
    the same line."""
    inst_len = corpus / "flan__b.parquet" / "inst_len.npy"
    np.save(inst_len, np.load(inst_len) + 1)  # every row's response now overlaps
    done = subprocess.run(
        [sys.executable, *entry, f"tokenized_path={corpus}", f"output_path={tmp_path / 'o'}",
         "--progress"],
        cwd=ROOT, capture_output=True, timeout=300,
    )  # fmt: skip
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "Reading indices" in stderr  # a bar was drawn before the error
    errors = [line for line in _screen(stderr) if ": error: " in line]
    prefixes = ("sample_tokenized.py: error: task ", "data_io sample: error: task ")
    assert len(errors) == 1 and errors[0].startswith(prefixes), errors
    assert f"delete {corpus / 'flan__b.parquet'} and re-run" in stderr
