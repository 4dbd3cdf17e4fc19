"""Every documented import path and command keeps working after the layout moved (issue 24):
the README's and the seeds' imports, the compatibility modules, the 25 cleaner modules, the two
scripts and every ``data_io`` sub-command."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.cleaning.registry import CLEANER_MODULES
from data_io.cli import _STAGE_MODULES

REPO = Path(__file__).resolve().parent.parent

# (module, names it must offer): the paths users write, as the docs and the seeds write them.
DOCUMENTED = [
    ("data_io", ["ConfigError", "DataIoError", "InputError", "OutputError", "TokenizerError"]),
    (
        "data_io.tokenize",
        [
            "tokenize",
            "tokenize_options",
            "parse_conditions",
            "TokenizeResult",
            "FileResult",
            "DEFAULT_BOQ",
            "DEFAULT_EOQ",
            "DEFAULT_EOA",
            "DEFAULT_CONDITIONS",
        ],
    ),
    (
        "data_io.load",
        [
            "SampledDataset",
            "ResumableDataLoader",
            "MemoryMappedDataset",
            "MixtureDataset",
            "MixtureSampler",
            "DistributedSampler",
            "StatefulLoader",
            "HuggingFaceDataset",
            "StreamingHuggingFaceDataset",
            "TokenizedRowsDataset",
            "RowSource",
            "LoaderConfig",
            "DataConfig",
            "DatasetSource",
            "TrainingPhase",
            "EvalConfig",
            "load_config",
            "build_dataloader",
            "build_eval_loader",
            "build_eval_loaders",
            "export_sampled_rows",
            "format_batch",
            "collate_samples",
        ],
    ),
    ("data_io.loader", ["SampledDataset", "ResumableDataLoader", "format_batch"]),
    ("data_io.encoder", ["TextEncoder", "EncodedBatch"]),
    ("data_io.train_tokenizer", ["train_tokenizer", "TrainResult"]),
    ("data_io.vocabularies", ["vocabulary_path", "hf_tokenizer_json", "main"]),
    ("data_io.tokenizer", ["TextEncoder", "train_tokenizer", "resolve_tokenizer"]),
    ("data_io.prepare", ["prepare", "PrepareResult"]),
    ("data_io.sampling", ["main", "sample", "parse_overrides", "SampleConfig"]),
    (
        "data_io.scale",
        [
            "ExecutorSettings",
            "Manifest",
            "Unit",
            "Outcome",
            "resume",
            "scale_tokenize",
            "plan_tokenize",
        ],
    ),
    ("data_io.errors", ["error_class"]),
]


@pytest.mark.parametrize(("module", "names"), DOCUMENTED, ids=[m for m, _ in DOCUMENTED])
def test_documented_names_import(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in names if not hasattr(imported, name)]
    assert not missing, f"{module} lacks {missing}"


def test_compatibility_modules_are_the_new_objects() -> None:
    from data_io.encoder import TextEncoder
    from data_io.load.datasets.sampled import SampledDataset
    from data_io.loader import SampledDataset as CompatSampled
    from data_io.tokenizer.encoder import TextEncoder as NewEncoder
    from data_io.tokenizer.train import train_tokenizer
    from data_io.train_tokenizer import train_tokenizer as compat_train

    assert TextEncoder is NewEncoder and CompatSampled is SampledDataset
    assert compat_train is train_tokenizer


@pytest.mark.parametrize(
    "module",
    ["data_io.encoder", "data_io.loader", "data_io.vocabularies", "data_io.train_tokenizer"],
)
def test_compatibility_modules_say_so_and_fit_one_screen(module: str) -> None:
    path = Path(importlib.import_module(module).__file__ or "")
    text = path.read_text(encoding="utf-8")
    assert text.startswith('"""Compat'), f"{path}: the first line must say it is a compat import"
    assert len(text.splitlines()) <= 25


@pytest.mark.parametrize("module", CLEANER_MODULES)
def test_cleaner_modules_import(module: str) -> None:
    assert callable(importlib.import_module(module).CLEANER.main)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_every_command_has_its_help() -> None:
    commands = [c for commands in _STAGE_MODULES.values() for c in commands]
    assert len(commands) == 13
    code = (
        "import contextlib, io, sys\nfrom data_io.cli import main\n"
        f"for command in {commands!r}:\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        try:\n"
        "            main([command, '--help'])\n"
        "        except SystemExit as exited:\n"
        "            assert exited.code == 0, command\n"
        "    assert f'usage: data_io {command}' in out.getvalue(), command\n"
    )
    done = _run("-c", code)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["-m", "data_io", "--help"],
        ["-m", "data_io.vocabularies", "--help"],
        ["-m", "pipe.clean_gsm8k_train", "--help"],
        ["sample_tokenized.py", "--help"],
    ],
    ids=["data_io", "vocabularies", "cleaner", "sample_tokenized"],
)
def test_entry_points_start(args: list[str]) -> None:
    done = _run(*args)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_scalable_commands_take_the_executor_options() -> None:
    from data_io.cli import build_parser
    from data_io.stage import STAGES

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in STAGES:
        options = {o for action in commands[name]._actions for o in action.option_strings}
        assert {"--executor", "--workers", "--unit-mb", "--slurm-opt"} <= options, name
    assert "--executor" not in {
        o for action in commands["sample"]._actions for o in action.option_strings
    }
