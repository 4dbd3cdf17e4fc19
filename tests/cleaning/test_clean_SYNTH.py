"""pipe_clustered.clean_SYNTH on a folder in the `hf download PleIAs/SYNTH` layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_io.cleaning import parquet_batches
from data_io.errors import InputError
from pipe_clustered.clean_SYNTH import CLEANER, COLUMNS

from .upstream import read_outputs, row, write_parquet

SELF = "https://pleias.fr/Pleias self-knowledge/about"


def _rows(*rows: tuple) -> dict[str, list]:
    """Upstream columns (the unused ones included) from (language, url, exercise, query,
    constraints, answer) tuples."""
    names = ("language", "query_seed_url", "exercise", "query", "constraints", "synthetic_answer")
    columns: dict[str, list] = {
        name: [values[i] for values in rows] for i, name in enumerate(names)
    }
    columns["synth_id"] = [f"synth_{i}" for i in range(len(rows))]
    columns["synthetic_reasoning"] = ["a long trace"] * len(rows)
    columns["model"] = ["baguettotron"] * len(rows)
    return columns


SHARDS = {
    # Listed first, read second: shards are read in sorted order.
    "synth_2.parquet": _rows(
        ("en", "https://a", "rag", "Q?", "\nUse 2 sources.", "A."),
        ("en", "https://b", "mcq", "Which? A) x B) y", None, "B"),
        ("en", "https://c", "math exercise", "2+2?", "", "4, since 2+2=4."),
        ("fr", "https://d", "memorization", "Qui?", "", "Moi."),
        ("en", SELF, "memorization", "Who are you?", "", "Pleias."),
        ("en", "https://e", "cooking", "Bake?", "", "Yes."),
        ("en", "https://f", "translation", "Translate.", "", "Done."),
        ("en", "https://g", "translation", "Translate 2.", "", "Done 2."),
        ("en", "https://h", "rag", "Q2?", None, "A2."),
        ("en", "https://i", "editing", None, "", "Edited."),
        (None, "https://j", "editing", "Edit?", "", "Edited."),
        ("en", None, "editing", "Edit?", "", "Edited."),
        ("en", "https://k", None, "Edit?", "", "Edited."),
        ("en", "https://l", "editing", "Edit this: teh.", "ignored", "the."),
    ),
    "synth_10.parquet": _rows(
        ("en", "https://m", "creative writing", "A poem.", "", "Roses…"),
        ("en", "https://n", "constrained writing", "No e.", "Avoid 'e'.", "A story."),
        ("en", "https://o", "math mcq", "1+1? A) 2", "", "A"),
        ("EN", "https://p", "mcq", "Case?", "", "A"),
    ),
}

EXPECTED = {
    "synth_10.parquet": [
        row("synth,cot", "A poem.", "Roses…"),
        # Constraints are joined only for rag.
        row("synth,cot", "No e.", "A story."),
        row("synth,direct", "1+1? A) 2", "A"),
    ],
    "synth_2.parquet": [
        # rag: query immediately followed by constraints, no separator.
        row("synth,cot", "Q?\nUse 2 sources.", "A."),
        row("synth,direct", "Which? A) x B) y", "B"),
        row("synth,noisy,cot", "2+2?", "4, since 2+2=4."),
        row("synth,cot", "Edit this: teh.", "the."),
    ],
}

DROPS = {
    "language is not en": 2,  # "fr", and "EN" (the test is exact)
    "Pleias self-knowledge seed": 1,
    "cooking exercise": 1,
    "exercise 'translation' has no condition": 2,
    "null query, constraints or synthetic_answer": 2,
    "null language, query_seed_url or exercise": 3,
}


def _raw(root: Path) -> Path:
    for name, columns in SHARDS.items():
        write_parquet(root / name, columns)
    # Not read: a nested folder and a file that is not a shard.
    write_parquet(root / "nested" / "synth_0.parquet", _rows(("en", "u", "mcq", "x", "", "y")))
    (root / "README.md").write_text("SYNTH\n", encoding="utf-8")
    return root


def _independent(root: Path) -> dict[str, list[dict]]:
    """The expected output re-derived with plain Python from cleaners.md §3.16."""
    table = {
        "creative writing": "synth,cot",
        "rag": "synth,cot",
        "memorization": "synth,cot",
        "constrained writing": "synth,cot",
        "editing": "synth,cot",
        "math mcq": "synth,direct",
        "mcq": "synth,direct",
        "math exercise": "synth,noisy,cot",
    }
    expected: dict[str, list[dict]] = {}
    for path in sorted(root.glob("*.parquet")):
        for item in pq.read_table(path).to_pylist():
            if None in (item["language"], item["query_seed_url"], item["exercise"]):
                continue
            if item["language"] != "en" or "Pleias self-knowledge" in item["query_seed_url"]:
                continue
            if item["exercise"] == "cooking" or item["exercise"] not in table:
                continue
            if item["exercise"] == "rag":
                if item["query"] is None or item["constraints"] is None:
                    continue
                instruction = item["query"] + item["constraints"]
            else:
                instruction = item["query"]
            if instruction is None or item["synthetic_answer"] is None:
                continue
            expected.setdefault(path.name, []).append(
                row(table[item["exercise"]], instruction, item["synthetic_answer"])
            )
    return expected


def test_rows_per_shard(tmp_path: Path) -> None:
    source = _raw(tmp_path / "SYNTH")
    report = CLEANER.run(source, tmp_path / "out", progress=False)
    written = read_outputs(report)  # also checks each file's schema
    assert written == EXPECTED
    assert written == _independent(source)
    assert report.records == 18
    assert dict(report.drops) == DROPS
    assert sum(report.drops.values()) + report.rows_written == report.records


def test_output_does_not_depend_on_batching(tmp_path: Path) -> None:
    source = _raw(tmp_path / "SYNTH")
    one_row = dataclasses.replace(CLEANER.source, reader=parquet_batches(1, columns=COLUMNS))
    report = dataclasses.replace(CLEANER, source=one_row).run(
        source, tmp_path / "b", progress=False
    )
    assert read_outputs(report) == EXPECTED
    assert dict(report.drops) == DROPS


def test_shard_with_only_dropped_rows_writes_no_file(tmp_path: Path) -> None:
    root = tmp_path / "SYNTH"
    write_parquet(root / "a.parquet", _rows(("de", "u", "mcq", "x", "", "y")))
    write_parquet(root / "b.parquet", _rows(("en", "u", "mcq", "x", "", "y")))
    report = CLEANER.run(root, tmp_path / "out", progress=False)
    assert [path.name for path, _ in report.files] == ["b.parquet"]
    assert dict(report.drops) == {"language is not en": 1}


def test_missing_column_names_the_shard(tmp_path: Path) -> None:
    root = tmp_path / "SYNTH"
    columns = _rows(("en", "u", "mcq", "x", "", "y"))
    del columns["synthetic_answer"]
    write_parquet(root / "synth_1.parquet", columns)
    with pytest.raises(InputError, match=r"synth_1\.parquet: column\(s\) \['synthetic_answer'\]"):
        CLEANER.run(root, tmp_path / "out", progress=False)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_missing_folder_says_what_to_download(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="hf download PleIAs/SYNTH --repo-type dataset"):
        CLEANER.run(tmp_path / "absent", tmp_path / "out", progress=False)


def test_shards_saved_by_polars_clean_the_same(tmp_path: Path) -> None:
    # Polars writes text as large_string; the rag join must not trip over the mixed types.
    import polars as pl

    source = _raw(tmp_path / "SYNTH")
    for path in source.glob("*.parquet"):
        pl.read_parquet(path).write_parquet(path)
    assert str(pq.read_schema(source / "synth_2.parquet").field("query").type) == "large_string"
    report = CLEANER.run(source, tmp_path / "out", progress=False)
    assert read_outputs(report) == EXPECTED
    assert dict(report.drops) == DROPS
