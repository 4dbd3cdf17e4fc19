"""pipe_clustered.clean_flan on a FLAN folder in the `hf download Open-Orca/FLAN` layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.cleaning import parquet_batches
from pipe_clustered.clean_flan import CLEANER

from .upstream import read_outputs, read_parquet, row, write_json, write_parquet

SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ")

# Upstream columns, the unused ones included.
SHARDS = {
    "cot_fsopt_data/part.1.parquet": {
        "inputs": ["Q: 5+5? Let's think.", "Q: odd?"],
        "targets": ["5+5=10. So 10.", "Yes."],
        "_template_idx": [0, 1],
        "_task_source": ["CoT", "CoT"],
        "_task_name": ["cot_gsm8k", "cot_esnli"],
        "_template_type": ["fs_opt", "fs_opt"],
    },
    "cot_fsopt_data/part.0.parquet": {
        "inputs": ["Q: 1+1?"],
        "targets": ["1+1=2. So 2."],
        "_template_idx": [3],
        "_task_source": ["CoT"],
        "_task_name": ["cot_gsm8k"],
        "_template_type": ["fs_opt"],
    },
    "niv2_zsopt_data/part.0.parquet": {
        "inputs": ["Tag: Paris", "x", "Ünï", "dropped", "y", ""],
        "targets": ["LOC", "y", "ok", None, "z", ""],
        "_template_idx": [0, 0, 0, 0, 0, 0],
        "_task_source": ["NIv2"] * 6,
        "_task_name": [
            "recast/recast_ner",
            "task1 (v2)",
            "tâche:é",
            "task1 (v2)",
            "recast/recast_ner",
            "task1 (v2)",
        ],
        "_template_type": ["zs_opt"] * 6,
    },
    "extra_data/part.0.parquet": {
        "inputs": ["a", "b"],
        "targets": ["c", "d"],
        "_template_idx": [0, 0],
        "_task_source": ["?", "?"],
        "_task_name": ["t", "t"],
        "_template_type": ["?", "?"],
    },
}


def _raw(root: Path) -> Path:
    for name, columns in SHARDS.items():
        write_parquet(root / name, columns)
    write_json(root / "flan_submix_data.json", [{"not": "read"}])
    return root


def _independent(root: Path) -> dict[str, list[dict]]:
    """The expected output re-derived with plain Python, from cleaners.md's description."""
    conditions = {"cot_fsopt_data": "cot", "niv2_zsopt_data": "direct"}
    expected: dict[str, list[dict]] = {}
    for name in sorted(SHARDS):
        subset = name.split("/")[0]
        if subset not in conditions:
            continue
        table = pq.read_table(root / name).to_pylist()
        for item in table:
            if None in (item["_task_name"], item["inputs"], item["targets"]):
                continue
            safe = "".join(c if c in SAFE else "_" for c in item["_task_name"])
            expected.setdefault(f"{subset}__{safe}.parquet", []).append(
                row(conditions[subset], item["inputs"], item["targets"])
            )
    return expected


def test_rows_per_task_file(tmp_path: Path) -> None:
    source = _raw(tmp_path / "FLAN")
    report = CLEANER.run(source, tmp_path / "flan", progress=False)
    written = read_outputs(report)  # also checks each file's schema
    assert written == _independent(source)
    # The file names of cleaners.md §1.3, spelled out.
    assert sorted(written) == [
        "cot_fsopt_data__cot_esnli.parquet",
        "cot_fsopt_data__cot_gsm8k.parquet",
        "niv2_zsopt_data__recast_recast_ner.parquet",
        "niv2_zsopt_data__t_che__.parquet",
        "niv2_zsopt_data__task1 _v2_.parquet",
    ]
    # Sorted shard order: part.0 before part.1.
    assert [r["instruction"] for r in written["cot_fsopt_data__cot_gsm8k.parquet"]] == [
        "Q: 1+1?",
        "Q: 5+5? Let's think.",
    ]
    assert report.records == 11
    assert dict(report.drops) == {"null field": 1, "subset not used": 2}


def test_output_does_not_depend_on_batching_or_open_files(tmp_path: Path) -> None:
    source = _raw(tmp_path / "FLAN")
    CLEANER.run(source, tmp_path / "a", progress=False)
    tiny = dataclasses.replace(
        CLEANER, source=dataclasses.replace(CLEANER.source, reader=parquet_batches(1))
    )
    tiny.run(
        source, tmp_path / "b", progress=False, writer_options={"max_open": 1, "row_group_rows": 1}
    )
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        assert read_parquet(tmp_path / "a" / name) == read_parquet(tmp_path / "b" / name)
    # One row group per row when the writer is forced to flush every row.
    assert (
        pq.ParquetFile(tmp_path / "b" / "niv2_zsopt_data__task1 _v2_.parquet").num_row_groups == 2
    )


def test_deterministic_bytes(tmp_path: Path) -> None:
    source = _raw(tmp_path / "FLAN")
    CLEANER.run(source, tmp_path / "a", progress=False)
    CLEANER.run(source, tmp_path / "b", progress=False)
    for path in (tmp_path / "a").iterdir():
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes()


def _wide_strings(root: Path, kind: str) -> None:
    """Every shard under ``root`` rewritten with its text columns as ``kind`` (what polars or
    another tool re-saving the download may store)."""
    for path in root.rglob("*.parquet"):
        table = pq.read_table(path)
        schema = pa.schema(
            [f.with_type(getattr(pa, kind)()) if f.type == pa.string() else f for f in table.schema]
        )
        pq.write_table(table.cast(schema), path)


@pytest.mark.parametrize("kind", ["large_string", "string_view"])
def test_shards_with_large_or_view_strings_clean_the_same(tmp_path: Path, kind: str) -> None:
    source = _raw(tmp_path / "FLAN")
    expected = _independent(source)
    _wide_strings(source, kind)
    assert pq.read_schema(source / "niv2_zsopt_data" / "part.0.parquet").field("inputs").type == (
        getattr(pa, kind)()
    )
    report = CLEANER.run(source, tmp_path / "flan", progress=False)
    assert read_outputs(report) == expected  # three plain string columns, as always
    assert dict(report.drops) == {"null field": 1, "subset not used": 2}
