"""Start-up cost of the ``data_io`` command line (issue 12): only the chosen stage is imported.

Each check runs a fresh interpreter (the test process has everything imported already) and
lists which heavy modules the import pulled in.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from data_io import cli

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "polars", "datasets", "pandas", "pyarrow", "omegaconf", "matplotlib")


def _imported_after(code: str) -> set[str]:
    """Which of HEAVY (and importlib.metadata) are in sys.modules after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    return {name for name in (*HEAVY, "importlib.metadata") if name in loaded}


def test_importing_the_cli_imports_no_heavy_module() -> None:
    assert _imported_after("import data_io.cli") == set()


def test_parsing_a_tokenize_command_imports_only_the_tokenize_stage() -> None:
    code = (
        "from data_io.cli import build_parser\n"
        "args = build_parser(['tokenize', 'in', '-o', 'out']).parse_args("
        "['tokenize', 'in', '-o', 'out'])\n"
        "assert args.command == 'tokenize'"
    )
    assert _imported_after(code) == set()


def test_full_parser_still_pulls_in_every_stage() -> None:
    """The control: without a command every stage registers, and with it polars and friends
    (so the tests above do see a heavy import when there is one)."""
    assert {"polars", "omegaconf"} <= _imported_after(
        "from data_io.cli import build_parser\nbuild_parser()"
    )


def _registered(modules: list[str]) -> list[str]:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers(dest="command")
    for name in modules:
        importlib.import_module(name).register(subparsers)
    return list(subparsers.choices)


@pytest.mark.parametrize("module", list(cli._STAGE_MODULES))
def test_each_stage_registers_exactly_the_commands_listed_for_it(module: str) -> None:
    # The table in cli.py must follow the modules: a command missing there would only be
    # reachable through the full parser.
    assert _registered([module]) == list(cli._STAGE_MODULES[module])


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["tokenize", "x", "-o", "y"], ["data_io.tokenize.cli"]),
        (["export-rows", "--help"], ["data_io.load.cli"]),
        (["-h"], list(cli._STAGE_MODULES)),
        ([], list(cli._STAGE_MODULES)),
        (["no-such-command"], list(cli._STAGE_MODULES)),
        (None, list(cli._STAGE_MODULES)),
    ],
)
def test_modules_for_a_command_line(argv: list[str] | None, modules: list[str]) -> None:
    assert cli._modules_for(argv) == modules


def test_unknown_command_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["tokenise", "x"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'tokenise'" in error
    assert all(c in error for c in ("'tokenize'", "'prepare'", "'clean'", "'loader-check'"))


def test_version_is_read_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    from data_io import __version__

    assert capsys.readouterr().out == f"data_io {__version__}\n"


def test_command_help_works_with_only_its_stage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["tokenize", "--help"])
    assert exited.value.code == 0
    assert "usage: data_io tokenize" in capsys.readouterr().out


def test_the_whole_one_row_run_stays_light(tmp_path: Path) -> None:
    """`python -m data_io tokenize` on one row imports none of the heavy modules."""
    rows = tmp_path / "in"
    rows.mkdir()
    row = {"condition": "direct", "instruction": "Hi there", "response": "Hello"}
    (rows / "a.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    code = (
        "import sys\nfrom data_io.cli import main\n"
        f"assert main(['tokenize', {str(rows)!r}, '-o', {str(tmp_path / 'out')!r}, '-q']) == 0"
    )
    assert _imported_after(code) == set()
    assert (tmp_path / "out" / "a.jsonl" / "tokens.npy").is_file()
