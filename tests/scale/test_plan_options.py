"""A saved plan's options and executor settings are checked before any unit runs: a damaged or
edited plan is refused once, naming the plan and the option, where each unit used to fail on its
own (on every node of a Slurm array); ``status`` still shows such a plan."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from data_io.cli import main
from data_io.errors import ConfigError
from data_io.scale import ExecutorSettings, Manifest, resume
from data_io.scale.finalize import finalize
from data_io.scale.plan import plan, plan_clean, plan_prepare, plan_tokenize
from data_io.scale.status import status
from data_io.tokenize import tokenize_options

from .inputs import TOKENIZER, write_inputs
from .test_prepare import OPTIONS, _inputs

SETTINGS = ExecutorSettings(kind="local", workers=1, threads_per_unit=1)


def _saved(stage: str, tmp_path: Path) -> Path:
    """A saved plan of ``stage`` over small inputs, its executor recorded as a run records it."""
    if stage == "tokenize":
        inputs = write_inputs(tmp_path / "in")
        manifest = plan_tokenize(
            tokenize_options([inputs], tmp_path / "out", tokenizer_path=TOKENIZER)
        )
    elif stage == "prepare":
        manifest = plan_prepare([str(_inputs(tmp_path / "in"))], tmp_path / "out", OPTIONS)
    elif stage == "train-tokenizer":
        inputs = write_inputs(tmp_path / "in")
        request = {
            "inputs": [str(inputs)],
            "output": str(tmp_path / "out" / "tokenizer.json"),
            "train": {"vocab_size": 800, "prefix_config": None},
        }
        manifest = plan("train-tokenizer", request, 0)
    else:
        tmp_path.mkdir(parents=True, exist_ok=True)
        manifest = plan_clean(["gsm8k_train"], tmp_path, tmp_path / "plan")
    manifest.executor = SETTINGS.recorded()
    return manifest.save()


def _edited(path: Path, where: list[str], value: object) -> Manifest:
    """The plan at ``path`` with ``where`` (keys from the top) set to ``value``, or removed
    when ``value`` is ``_REMOVED``."""
    content = json.loads(path.read_text())
    target = content
    for key in where[:-1]:
        target = target[key]
    if value is _REMOVED:
        del target[where[-1]]
    else:
        target[where[-1]] = value
    path.write_text(json.dumps(content))
    return Manifest.load(path)


_REMOVED = object()

EDITS = [
    ("tokenize", ["options", "batch_rows"], "many",
     "tokenize's option batch_rows is a string ('many'), not an integer"),
    ("tokenize", ["options", "batch_rows"], 0, "batch_rows must be at least 1, not 0"),
    ("tokenize", ["options", "on_error"], "ignore", "on_error must be 'fail' or 'skip'"),
    ("tokenize", ["options", "threads"], 1.5,
     "tokenize's option threads is a number (1.5), not an integer or null"),
    ("tokenize", ["options", "conditions"], [["direct"]], "conditions holds a pair that is not"),
    ("tokenize", ["options", "boq"], None, "tokenize's option boq is null (None), not a string"),
    ("tokenize", ["options", "typo"], 1, "tokenize has no option typo"),
    ("tokenize", ["options", "inputs"], _REMOVED, "tokenize's options lack inputs"),
    ("prepare", ["options", "prepare", "val_fraction"], "0.2",
     "prepare's option val_fraction is a string ('0.2'), not a number"),
    ("prepare", ["options", "prepare", "tokens_per_shard"], 0, "tokens_per_shard must be"),
    ("prepare", ["options", "prepare", "dedup"], "fuzzy", "dedup must be one of"),
    ("prepare", ["options", "run"], [], "prepare's option run is an array ([]), not an object"),
    ("train-tokenizer", ["options", "train", "vocab_size"], 0, "vocab_size must be at least 1"),
    ("train-tokenizer", ["options", "train", "special_tokens"], "<s>",
     "train-tokenizer's option special_tokens is a string ('<s>'), not a list of strings or null"),
    ("train-tokenizer", ["options", "train", "tokenizer_type"], "wordpiece", "'bpe' or 'unigram'"),
    ("train-tokenizer", ["options", "train", "trainer"], "hf", "the rust trainer"),
    ("clean", ["options", "names"], ["nope"], "no cleaner called 'nope'"),
    ("clean", ["options", "names"], "gsm8k_train", "clean's option names is a string"),
]  # fmt: skip


@pytest.mark.parametrize(("stage", "where", "value", "said"), EDITS)
def test_an_edited_option_is_refused_before_any_unit_runs(
    tmp_path: Path, stage: str, where: list[str], value: object, said: str
) -> None:
    path = _saved(stage, tmp_path)
    manifest = _edited(path, where, value)
    with pytest.raises(ConfigError) as refused:
        resume(manifest, SETTINGS, progress=False)
    message = str(refused.value)
    assert message.startswith(f"{path}: ")
    assert said in message and re.search("plan the run again", message)
    # No unit was started, and status still reads the plan.
    assert not list(manifest.units_dir.glob("*.started"))
    assert set(status(Manifest.load(path)).counts) <= {"pending", "done", "failed", "running"}
    # `data_io scale finalize` refuses it too.
    with pytest.raises(ConfigError, match="plan the run again"):
        finalize(manifest, encode_missing=True, progress=False)


def test_an_unedited_plan_passes_its_check(tmp_path: Path) -> None:
    for stage in ("tokenize", "prepare", "train-tokenizer", "clean"):
        Manifest.load(_saved(stage, tmp_path / stage)).check_options()


@pytest.mark.parametrize(
    ("setting", "value", "said"),
    [
        ("workers", "2", "the executor's option workers is a string ('2'), not an integer"),
        ("workers", 0, "workers must be at least 1, not 0"),
        ("retries", -1, "retries must be at least 0, not -1"),
        ("slurm_options", {"partition": 1}, "slurm_options is an object"),
        ("kind", "kubernetes", "executor 'kubernetes' is not one of local, slurm, ray"),
    ],
)
def test_an_edited_executor_setting_is_refused_at_resume(
    tmp_path: Path, setting: str, value: object, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _saved("tokenize", tmp_path)
    manifest = _edited(path, ["executor", setting], value)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: .*{re.escape(said)}"):
        resume(manifest, progress=False)
    assert not list(manifest.units_dir.glob("*.started"))
    # The command says the same, as an error, not a traceback.
    assert main(["resume", str(path), "-q"]) != 0
    assert said in capsys.readouterr().err
