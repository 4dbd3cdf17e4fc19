"""data_io.cleaning.writers: bytes, grouping, bounded buffers, atomic replacement."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.cleaning.writers import (
    OutputWriter,
    jsonl_file,
    jsonl_files,
    parquet_file,
    parquet_files,
)
from data_io.errors import OutputError

from .upstream import REPO_ROOT, jsonl_bytes, read_jsonl

TRICKY = [
    'quote " backslash \\ slash /',
    "controls \x00\x01\x08\x0c\x1f\x7f tab\tnew\nline\r",
    "non-ASCII é 中 😀 \u2028\u2029 \ufeff",
    "",
]


def _table(
    conditions: list[str],
    instructions: list[str],
    responses: list[str],
    files: list[str] | None = None,
) -> pa.Table:
    columns = {"condition": conditions, "instruction": instructions, "response": responses}
    if files is not None:
        columns["file"] = files
    return pa.table(columns)


def _temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".tmp-" in p.name]


def test_jsonl_bytes_are_compact_utf8_json(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    with OutputWriter(jsonl_file(str(out))) as writer:
        writer.write(_table(["cot"] * 4, TRICKY, list(reversed(TRICKY))))
        writer.write(_table(["direct"], ["second"], ["batch"]))
        writer.commit()
    expected = [
        {"condition": "cot", "instruction": i, "response": r}
        for i, r in zip(TRICKY, reversed(TRICKY), strict=True)
    ] + [{"condition": "direct", "instruction": "second", "response": "batch"}]
    assert out.read_bytes() == jsonl_bytes(expected)


def test_parquet_has_three_string_columns(tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    table = pa.table(
        {
            name: pa.array(["cot"], pa.large_string())
            for name in ("response", "condition", "instruction")
        }
    )
    with OutputWriter(parquet_file(str(out))) as writer:
        writer.write(table)
        writer.commit()
    read = pq.read_table(out)
    assert read.schema.names == ["condition", "instruction", "response"]
    assert all(field.type == pa.string() for field in read.schema)


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
@pytest.mark.parametrize("options", [{}, {"max_open": 1, "row_group_rows": 2, "buffer_bytes": 64}])
def test_keyed_output_matches_plain_grouping(tmp_path: Path, fmt: str, options: dict) -> None:
    rng = random.Random(11)
    keys = ["k0", "k1", "k2", "k3", "k4"]
    rows = [
        (rng.choice(["cot", "direct"]), f"q{i} {rng.random()}", f"a{i}", rng.choice(keys))
        for i in range(400)
    ]
    spec = (
        jsonl_files(str(tmp_path / "out"))
        if fmt == "jsonl"
        else parquet_files(str(tmp_path / "out"))
    )
    with OutputWriter(spec, **options) as writer:
        for start in range(0, len(rows), 37):
            chunk = rows[start : start + 37]
            writer.write(_table(*(list(column) for column in zip(*chunk, strict=True))))
        written = writer.commit()
    expected: dict[str, list[dict]] = {}
    for condition, instruction, response, key in rows:
        expected.setdefault(f"{key}.{fmt}", []).append(
            {"condition": condition, "instruction": instruction, "response": response}
        )
    if fmt == "jsonl":
        got = {path.name: read_jsonl(path) for path, _ in written}
    else:
        got = {path.name: pq.read_table(path).to_pylist() for path, _ in written}
    assert got == expected
    assert [n for _, n in written] == [len(expected[p.name]) for p, _ in written]
    assert _temporaries(tmp_path) == []
    if fmt == "parquet" and options:
        # Bounded row groups: never more than row_group_rows rows in one.
        parquet = pq.ParquetFile(tmp_path / "out" / "k0.parquet")
        assert (
            max(parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)) <= 37
        )


@pytest.mark.parametrize("spec", [jsonl_file, parquet_file])
def test_failure_leaves_previous_output_untouched(tmp_path: Path, spec) -> None:
    out = tmp_path / "x.out"
    out.write_bytes(b"previous")
    with pytest.raises(RuntimeError), OutputWriter(spec(str(out))) as writer:
        writer.write(_table(["cot"] * 3, ["a"] * 3, ["b"] * 3))
        raise RuntimeError("the cleaner failed")
    assert out.read_bytes() == b"previous"
    assert _temporaries(tmp_path) == []


def test_empty_single_outputs_are_valid_files(tmp_path: Path) -> None:
    for spec in (jsonl_file(str(tmp_path / "e.jsonl")), parquet_file(str(tmp_path / "e.parquet"))):
        with OutputWriter(spec) as writer:
            assert writer.commit()[0][1] == 0
    assert (tmp_path / "e.jsonl").read_bytes() == b""
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0


def test_keyed_output_without_rows_writes_nothing(tmp_path: Path) -> None:
    with OutputWriter(parquet_files(str(tmp_path / "none"))) as writer:
        assert writer.commit() == []
    assert not (tmp_path / "none").exists() or list((tmp_path / "none").iterdir()) == []


def test_out_of_the_wrong_kind(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="must be a folder"):
        OutputWriter(parquet_files(str(tmp_path / "file")))
    with pytest.raises(OutputError, match="is a folder"):
        OutputWriter(jsonl_file(str(tmp_path)))


# A child process that keeps writing until it is killed.
_WRITE_FOREVER = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from data_io.cleaning.writers import OutputWriter, jsonl_file, parquet_files
    kind, target = sys.argv[1], sys.argv[2]
    spec = jsonl_file(target) if kind == "jsonl" else parquet_files(target)
    table = pa.table({"condition": ["cot"] * 1000, "instruction": ["x" * 100] * 1000,
                      "response": ["y"] * 1000, "file": ["part"] * 1000})
    if kind == "jsonl":
        table = table.drop_columns(["file"])
    with OutputWriter(spec, row_group_rows=1000) as writer:
        print("writing", flush=True)
        while True:
            writer.write(table)
    """
)


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
def test_killed_mid_write_leaves_no_partial_output(tmp_path: Path, kind: str) -> None:
    target = tmp_path / ("out.jsonl" if kind == "jsonl" else "out")
    final = target if kind == "jsonl" else target / "part.parquet"
    if kind == "jsonl":
        target.write_text("previous\n")
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITE_FOREVER, kind, str(target)],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "writing\n"
        deadline = time.monotonic() + 60
        while not any(p.stat().st_size > 1_000_000 for p in _temporaries(tmp_path)):
            assert time.monotonic() < deadline, "the child wrote nothing"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    if kind == "jsonl":
        assert target.read_text() == "previous\n"
    else:
        assert not final.exists()
    leftovers = _temporaries(tmp_path)
    assert leftovers and all(not p.name.endswith((".jsonl", ".parquet")) for p in leftovers)
    # The next run removes what the killed one left (its process is gone) and succeeds.
    spec = jsonl_file(str(target)) if kind == "jsonl" else parquet_files(str(target))
    table = _table(["cot"], ["again"], ["done"], None if kind == "jsonl" else ["part"])
    with OutputWriter(spec) as writer:
        writer.write(table)
        writer.commit()
    assert _temporaries(tmp_path) == []
    assert final.exists()


def test_temporaries_of_live_processes_are_kept(tmp_path: Path) -> None:
    alive = tmp_path / "x.parquet.tmp-1.part0"  # pid 1 (init) is always alive
    alive.write_bytes(b"another run's file")
    with OutputWriter(parquet_files(str(tmp_path))) as writer:
        writer.write(_table(["cot"], ["q"], ["a"], ["y"]))
        writer.commit()
    assert alive.exists() and (tmp_path / "y.parquet").exists()
