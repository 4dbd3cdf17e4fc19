"""pipe_clustered.clean_openthoughts2 on a local copy in the
`hf download open-thoughts/OpenThoughts2-1M` layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipe_clustered.clean_openthoughts2 import CLEANER

from .upstream import read_parquet, row, run_expecting_error, with_batch_rows, write_hub_copy


def _item(source: str | None, *turns: tuple[str | None, str | None]) -> dict:
    return {
        "source": source,
        "conversations": [{"from": speaker, "value": value} for speaker, value in turns],
    }


def _pair(source: str | None, question: str | None, answer: str | None) -> dict:
    return _item(source, ("user", question), ("assistant", answer))


TRAIN = [
    _pair("ai2-adapt-dev/openmath-2-math", "Solve x+1=2.", "<think>\nx=1\n</think>\n\nx = 1"),
    # Excluded sources: dropped before the turn assertions, so their shape does not matter.
    _item("glaive", ("user", "only one turn")),
    _pair("sharegpt", "hi", "hello"),
    _pair("nvidia_math", "1+1?", "<think>2</think>2"),
    # The code heuristic: python in any case, in either text; a code fence in the answer.
    _pair("stackexchange_physics", "Use PyThOn to plot", "<think>x</think>ok"),
    _pair("stackexchange_physics", "Plot it", "<think>I could use python</think>No code."),
    _pair("stackexchange_physics", "Show", "<think>t</think>```\nx\n```"),
    # A code fence in the question only is kept.
    _pair("camel", "What does ```a``` mean?", "<think>t</think>Backticks."),
    # A null text.
    _pair("camel", None, "<think>t</think>x"),
    # Unclosed thinking, and nothing left after it.
    _pair("camel", "unclosed", "<think>never ends"),
    _pair("camel", "empty", "<think>t</think>  \n"),
    # No thinking at all: kept as-is; a null source is not an excluded one.
    _pair(None, "  Ünï  ", "Plain answer.\n"),
]
EXPECTED = [
    row("synth,cot", "Solve x+1=2.", "\n\nx = 1"),
    row("synth,cot", "What does ```a``` mean?", "Backticks."),
    row("synth,cot", "  Ünï  ", "Plain answer.\n"),
]
EXCLUDED = {
    "dolphin",
    "evolcodegolf",
    "glaive",
    "magicoder",
    "sharegpt",
    "codefeedback",
    "nvidia_math",
}


def _independent(items: list[dict]) -> list[dict]:
    """cleaners.md §3.22 re-derived in plain Python, plus the null and answer checks."""
    rows = []
    for item in items:
        if item["source"] in EXCLUDED:
            continue
        (_, question), (_, answer) = ((t["from"], t["value"]) for t in item["conversations"])
        if question is None or answer is None:
            continue
        if "python" in question.lower() or "python" in answer.lower() or "```" in answer:
            continue
        response = re.sub(r"<think>.*?</think>", "", answer, flags=re.DOTALL)
        if "<think>" in response or not response.strip():
            continue
        rows.append(row("synth,cot", question, response))
    return rows


def _copy(root: Path, items: list[dict]) -> Path:
    return write_hub_copy(root, {("default", "train"): items})


def test_rows(tmp_path: Path) -> None:
    out = tmp_path / "openthoughts2" / "all.parquet"
    report = CLEANER.run(_copy(tmp_path / "ot2", TRAIN), out, progress=False)
    assert read_parquet(out) == EXPECTED == _independent(TRAIN)
    assert report.records == 12 and report.rows_written == 3
    assert dict(report.drops) == {
        "code source": 2,
        "nvidia_math source (covered by OpenMathInstruct-2)": 1,
        "mentions python or has a code fence": 3,
        "null field": 1,
        "unclosed <think>": 1,
        "empty answer after removing <think>": 1,
    }


def test_batch_size_does_not_change_the_output(tmp_path: Path) -> None:
    report = with_batch_rows(CLEANER, 1).run(
        _copy(tmp_path / "ot2", TRAIN), tmp_path / "all.parquet", progress=False
    )
    assert read_parquet(tmp_path / "all.parquet") == EXPECTED
    assert sum(report.drops.values()) == 9


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_item("camel", ("user", "q")), "1 conversation turns, expected 2 (user, assistant)"),
        (
            _item("camel", ("user", "q"), ("assistant", "a"), ("user", "again")),
            "3 conversation turns, expected 2",
        ),
        (
            _item("camel", ("system", "be nice"), ("user", "q")),
            "turns are from 'system' then 'user', expected 'user' then 'assistant'",
        ),
        (
            _item("camel", ("assistant", "a"), ("user", "q")),
            "turns are from 'assistant' then 'user'",
        ),
    ],
)
def test_assertions_name_the_row(tmp_path: Path, bad: dict, message: str) -> None:
    # Batches of 5: the bad row (12) is in the third batch, after an excluded row (10) that
    # would also break the shape rule and must not be the one reported.
    items = [*TRAIN[:10], _item("magicoder", ("user", "x")), TRAIN[10], bad]
    run_expecting_error(
        with_batch_rows(CLEANER, 5),
        _copy(tmp_path / "ot2", items),
        tmp_path / "all.parquet",
        "assertion failed",
        f"default/train row 12: {message}",
    )
