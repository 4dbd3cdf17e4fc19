"""pipe_clustered.clean_tasksource on a local copy in the `hf download` layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.cleaning import safe_name
from pipe_clustered.clean_tasksource import CLEANER, EXCLUDED, TASKS

from .upstream import read_outputs, row, run_expecting_error, with_batch_rows, write_hub_copy

SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ")


def _row(task: str | None, inputs: str | None, targets: str | None) -> dict:
    return {"inputs": inputs, "targets": targets, "languages": ["en"], "task": task}


TRAIN = [
    _row("recast/recast_ner", "Premise: Paris is a city.\nLabel?", "entailment."),
    _row("WANLI", "Does A entail B?", "neutral"),
    _row("dynasent/dynabench.dynasent.r1.all/r1", "Sentiment of 'meh'?", "neutral.."),
    _row("recast/recast_ner", "Second row.", "not-entailment"),
    _row("sen-making/1", "Which is odd?", "."),
    _row("lexical_relation_classification/BLESS", "dog : animal ?", "hypernym.\n"),
    _row("reclor", "  Passage…  ", " B. "),
    # Excluded by the original (commented out), unknown, and null tasks are dropped.
    _row("lexical_relation_classification/K&H+N", "x", "y"),
    _row("hh-rlhf", "x", "y"),
    _row("not_a_task", "x", "y"),
    _row(None, "x", "y"),
    # An allowed task with a null field is dropped too.
    _row("WANLI", None, "y"),
    _row("WANLI", "x", None),
]

EXPECTED = {
    "WANLI.parquet": [
        row("direct", "Does A entail B?", "neutral"),
    ],
    # "/" and other characters outside [A-Za-z0-9_-. ] become "_".
    "dynasent_dynabench.dynasent.r1.all_r1.parquet": [
        row("direct", "Sentiment of 'meh'?", "neutral."),
    ],
    "lexical_relation_classification_BLESS.parquet": [
        # Only a "." at the very end is removed.
        row("direct", "dog : animal ?", "hypernym.\n"),
    ],
    "recast_recast_ner.parquet": [
        row("direct", "Premise: Paris is a city.\nLabel?", "entailment"),
        row("direct", "Second row.", "not-entailment"),
    ],
    "reclor.parquet": [
        row("direct", "  Passage…  ", " B. "),
    ],
    "sen-making_1.parquet": [
        row("direct", "Which is odd?", ""),
    ],
}


def _copy(root: Path, train: list[dict]) -> Path:
    # Other splits exist upstream; only train is used.
    return write_hub_copy(
        root,
        {
            ("default", "train"): train,
            ("default", "validation"): [_row("WANLI", "unused", "unused")],
        },
    )


def _independent(train: list[dict]) -> dict[str, list[dict]]:
    """The expected output re-derived with plain Python from cleaners.md §3.24."""
    expected: dict[str, list[dict]] = {}
    for item in train:
        if item["task"] not in TASKS or item["inputs"] is None or item["targets"] is None:
            continue
        targets = item["targets"][:-1] if item["targets"].endswith(".") else item["targets"]
        name = "".join(c if c in SAFE else "_" for c in item["task"]) + ".parquet"
        expected.setdefault(name, []).append(row("direct", item["inputs"], targets))
    return dict(sorted(expected.items()))


@pytest.mark.parametrize("batch_rows", [16_384, 1, 4])
def test_rows_per_task(tmp_path: Path, batch_rows: int) -> None:
    source = _copy(tmp_path / "tasksource-instruct-v0", TRAIN)
    report = with_batch_rows(CLEANER, batch_rows).run(source, tmp_path / "out", progress=False)
    written = read_outputs(report)
    assert written == EXPECTED
    assert written == _independent(TRAIN)
    assert report.records == 13
    assert dict(report.drops) == {"task not in the allow-list": 4, "null inputs or targets": 2}
    assert sum(report.drops.values()) + report.rows_written == report.records


def test_allow_list() -> None:
    assert len(TASKS) == 194
    assert len(set(TASKS)) == 194
    assert len(EXCLUDED) == len(set(EXCLUDED)) == 58
    assert not set(TASKS) & set(EXCLUDED)
    # No two tasks share an output file.
    assert len({safe_name(task) for task in TASKS}) == 194
    # A few spelled out in full, brace groups included.
    for task in (
        "robust_nli/ST_LM",
        "universal_dependencies/en_ewt/deprel",
        "crowdflower/sentiment_nuclear_power",
        "ontonotes_english/SpeedOfMagic--ontonotes_english",
        "dnd_style_intents",
        "reclor",
    ):
        assert task in TASKS


def test_missing_column_names_the_rows(tmp_path: Path) -> None:
    rows = [{"task": "WANLI", "inputs": "x"}]
    source = write_hub_copy(tmp_path / "tasksource", {("default", "train"): rows})
    run_expecting_error(
        CLEANER, source, tmp_path / "out", "default/train row", "['targets'] missing"
    )
