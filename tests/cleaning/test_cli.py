"""`data_io clean`: --list, names, --all, and its errors."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.cleaning import registry
from data_io.cleaning.registry import CLEANER_MODULES, entries, find, name_of
from data_io.cli import main

from .upstream import (
    REPO_ROOT,
    read_jsonl,
    read_parquet,
    run_module_offline,
    write_json,
    write_parquet,
)


def _raw_data(root: Path) -> None:
    for name in ("math", "reading", "law", "science", "physics"):
        write_json(
            root / "raw_data" / "Platypus" / "ARB" / f"{name}.json",
            [{"instruction": name, "response": "r"}],
        )
    write_parquet(
        root / "raw_data" / "FLAN" / "t0_zsopt_data" / "part.0.parquet",
        {"_task_name": ["t/1"], "inputs": ["i"], "targets": ["o"]},
    )


def test_registry_names() -> None:
    names = [name_of(module) for module in CLEANER_MODULES]
    assert len(names) == 25 == len(set(names))
    assert find("GSM8K_TRAIN").module == "pipe.clean_gsm8k_train"
    assert find("pipe_clustered.clean_flan").name == "flan"
    written = {entry.name for entry in entries() if entry.cleaner is not None}
    assert {"gsm8k_train", "arb", "flan", "ampsmathematica"} <= written


def test_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _raw_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["clean", "--list"]) == 0
    listing = capsys.readouterr().out
    for module in CLEANER_MODULES:
        assert module in listing
    assert "source: raw raw_data/Platypus/ARB/{math.json," in listing
    assert "[present: raw_data/Platypus/ARB]" in listing
    assert "[missing: raw_data/amps.tar.gz]" in listing
    assert "no local copy at raw_data/hub/openai/gsm8k: streams from the Hub" in listing
    assert "output: data_clustered/flan/<file>.parquet" in listing


def test_all_runs_the_cleaners_whose_sources_are_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _raw_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["clean", "--all"]) == 0
    out = capsys.readouterr().out
    assert "arb: 5 records read, 5 rows written to 5 files" in out
    assert "flan: 1 record read, 1 row written to 1 file" in out
    assert "gsm8k_train" not in out
    assert read_jsonl(tmp_path / "data" / "Platypus" / "arb_law.jsonl") == [
        {
            "condition": "direct",
            "instruction": "Choose the correct option letter.\n\nlaw",
            "response": "r",
        }
    ]
    assert read_parquet(tmp_path / "data_clustered" / "flan" / "t0_zsopt_data__t_1.parquet") == [
        {"condition": "direct", "instruction": "i", "response": "o"}
    ]


def test_names_with_source_and_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _raw_data(tmp_path)
    out = tmp_path / "elsewhere"
    assert (
        main(
            ["clean", "arb", "--source", str(tmp_path / "raw_data/Platypus/ARB"), "--out", str(out)]
        )
        == 0
    )
    assert sorted(p.name for p in out.iterdir()) == [
        "arb_law.jsonl",
        "arb_math.jsonl",
        "arb_physics.jsonl",
        "arb_reading.jsonl",
        "arb_science.jsonl",
    ]


def test_one_failure_fails_the_run_but_not_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _raw_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["clean", "ampsmathematica", "arb", "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "clean ampsmathematica: error: raw input not found: raw_data/amps.tar.gz" in captured.err
    assert "1 of 2 cleaners failed: ampsmathematica" in captured.err
    assert captured.out == ""  # --quiet: nothing but the errors
    assert (tmp_path / "data" / "Platypus" / "arb_math.jsonl").exists()


def test_a_cleaner_named_twice_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from data_io.cleaning import runner

    _raw_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    ran: list[str] = []
    real = runner.run_cleaner

    def counted(cleaner, *args, **kwargs):
        ran.append(cleaner.name)
        return real(cleaner, *args, **kwargs)

    monkeypatch.setattr(runner, "run_cleaner", counted)
    # By name and by module path, around another cleaner: each runs once, in first-named order.
    assert main(["clean", "arb", "flan", "pipe.clean_platypus.clean_arb", "ARB"]) == 0
    assert ran == ["arb", "flan"]
    captured = capsys.readouterr()
    assert captured.err == (
        "clean: note: arb is named 3 times (arb, pipe.clean_platypus.clean_arb, ARB); it runs once\n"
    )
    assert captured.out.count("arb: 5 records read") == 1
    # One cleaner named twice is one cleaner: --out applies to it.
    out = tmp_path / "elsewhere"
    assert main(["clean", "arb", "arb", "--out", str(out), "--quiet"]) == 0
    assert ran == ["arb", "flan", "arb"] and len(list(out.glob("arb_*.jsonl"))) == 5
    assert capsys.readouterr() == ("", "")  # --quiet: the note is not an error
    # Two different cleaners with --out are still refused.
    assert main(["clean", "arb", "flan", "arb", "--out", str(out)]) == 1
    assert "--source and --out apply to one cleaner" in capsys.readouterr().err


def test_ctrl_c_stops_the_whole_run_with_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C in one cleaner was counted as that cleaner's failure, and the next one ran."""
    from data_io.cleaning import runner

    _raw_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    real = runner.run_cleaner

    def interrupted_at_flan(cleaner, *args, **kwargs):
        if cleaner.name.startswith("flan"):
            raise KeyboardInterrupt
        return real(cleaner, *args, **kwargs)

    monkeypatch.setattr(runner, "run_cleaner", interrupted_at_flan)
    flan = next(e.name for e in entries() if e.name.startswith("flan"))
    assert main(["clean", "arb", flan, "gsm8k_train", "--quiet"]) == 130
    err = capsys.readouterr().err
    assert f"clean {flan}: interrupted; nothing was written" in err
    assert f"clean: stopped by Ctrl-C at {flan}; 1 of 3 cleaners finished before it (arb)" in err
    assert "failed" not in err and "gsm8k_train" not in err  # not run, not called failed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["clean"], "name the cleaners to run, or pass --all"),
        (["clean", "--all", "arb"], "name the cleaners to run, or pass --all"),
        (["clean", "--all", "--out", "x"], "--source and --out apply to one cleaner"),
        (["clean", "arb", "flan", "--out", "x"], "--source and --out apply to one cleaner"),
        (["clean", "nope"], "no cleaner called 'nope'; known cleaners: amps_khan, gsm8k_train"),
        (["clean", "not_yet"], "not written yet: not_yet"),
    ],
)
def test_usage_errors(
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A registered module that does not exist yet, as the unwritten cleaners are.
    monkeypatch.setattr(registry, "CLEANER_MODULES", (*CLEANER_MODULES, "pipe.clean_not_yet"))
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_quiet_prints_nothing_on_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _raw_data(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["clean", "arb", "flan", "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert len(list((tmp_path / "data" / "Platypus").glob("arb_*.jsonl"))) == 5


def test_module_quiet_prints_nothing_but_errors(tmp_path: Path) -> None:
    _raw_data(tmp_path)
    done = run_module_offline("pipe.clean_platypus.clean_arb", tmp_path, "--quiet")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    loud = run_module_offline("pipe.clean_platypus.clean_arb", tmp_path)
    assert "wrote data/Platypus/arb_law.jsonl (1 rows)" in loud.stdout
    failed = run_module_offline("pipe_clustered.clean_ampsmathematica", tmp_path, "--quiet")
    assert failed.returncode == 1 and failed.stdout == ""
    assert "raw input not found: raw_data/amps.tar.gz" in failed.stderr


def _options(help_text: str) -> dict[str, str]:
    """Each option of an argparse help text with its (joined) description."""
    options: dict[str, str] = {}
    current = None
    for line in help_text.splitlines():
        stripped = line.strip()
        if line.startswith("  ") and not line.startswith("    ") and stripped[:1] in "-N":
            current = stripped.split()[0].rstrip(",")
            options[current] = " ".join(stripped.split()[1:])
        elif current is not None and line.startswith("    "):
            options[current] += " " + stripped
        else:
            current = None
    return options


def test_help_gives_every_option_a_description_and_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["clean", "--help"])
    options = _options(capsys.readouterr().out)
    scale_out = {
        "--executor",
        "--workers",
        "--threads-per-unit",
        "--unit-mb",
        "--slurm-opt",
        "--wait",
        "--ray-address",
        "--plan-dir",
    }
    assert (
        set(options)
        == {"-h", "NAME", "--list", "--all", "--source", "--out", "--quiet"} | scale_out
    )
    for name, text in options.items():
        if name != "-h":
            assert "(default:" in text, f"{name}: {text}"
    assert "print nothing but errors" in options["--quiet"]
    gsm8k = find("gsm8k_train").cleaner
    assert gsm8k is not None
    with pytest.raises(SystemExit):
        gsm8k.main(["--help"])
    options = _options(capsys.readouterr().out)
    assert "(default: raw_data/hub/openai/gsm8k;" in options["--source"]
    assert "(default: data/gsm8k_train.jsonl)" in options["--out"]


# Loaded by the child below (PYTHONPATH): Ctrl-C arrives at a set point of the imports, while the
# cleaner module is importing the cleaning stage (pyarrow, polars), before its main() runs.
_CTRL_C_WHILE_IMPORTING = """
import os, signal, sys, time
class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "data_io.cleaning.runner":
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the handler raises KeyboardInterrupt at once; never slept out
        return None
sys.meta_path.insert(0, CtrlC())
"""


@pytest.mark.parametrize("module", ["pipe.clean_gsm8k_train", "pipe_clustered.clean_flan"])
@pytest.mark.usefixtures("python_sigint")  # the child's SIGINT as a terminal's child has it
def test_module_ctrl_c_while_importing_exits_130_without_a_traceback(
    tmp_path: Path, module: str
) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_CTRL_C_WHILE_IMPORTING)
    done = subprocess.run(
        [sys.executable, "-m", module],
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{hook}:{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (130, ""), done.stderr
    assert done.stderr == "clean: interrupted while starting; nothing was written\n"
    assert not (tmp_path / "data").exists() and not (tmp_path / "data_clustered").exists()


def test_importing_the_cleaners_leaves_the_excepthook_alone() -> None:
    # `data_io clean` and tests import the packages: only `python -m` changes the hook.
    before = sys.excepthook
    for module in ("pipe", "pipe_clustered", "pipe.clean_platypus"):
        importlib.reload(importlib.import_module(module))
    assert sys.excepthook is before


# A Ctrl-C once the cleaner runs, outside run_cleaner (its summary printing, after the output
# was committed): the start is over, so it is not "while starting; nothing was written".
_CTRL_C_AFTER_COMMIT = """
import data_io.cleaning.runner as runner

class Report:
    warnings = []
    def format(self):
        raise KeyboardInterrupt

def committed(cleaner, source, out, progress=None):
    open("written.jsonl", "w").close()
    return Report()

runner.run_cleaner = committed
"""


def test_module_ctrl_c_after_the_start_is_not_said_to_be_while_starting(tmp_path: Path) -> None:
    hook = tmp_path / "hook"
    hook.mkdir()
    # Installed once pipe's package (which sets the quiet start) is imported by `python -m`.
    (hook / "sitecustomize.py").write_text(
        "import sys\n"
        "class After:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pipe.clean_gsm8k_train':\n"
        f"            exec({_CTRL_C_AFTER_COMMIT!r}, {{}})\n"
        "        return None\n"
        "sys.meta_path.insert(0, After())\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_gsm8k_train"],
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{hook}:{REPO_ROOT}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (tmp_path / "written.jsonl").exists()
    assert "while starting" not in done.stderr
    assert "nothing was written" not in done.stderr
    assert "KeyboardInterrupt" in done.stderr
