"""``data_io prepare --executor local``: pass 1 of each source as a unit, de-duplication, the
split and the shards in the finalize run: the same shards, state and metadata as one run."""

from __future__ import annotations

import bz2
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from data_io import _core
from data_io.errors import ConfigError
from data_io.formats.ranges import MOST_RANGES
from data_io.prepare import prepare
from data_io.scale import ExecutorSettings
from data_io.scale.manifest import Manifest
from data_io.scale.run import scale_prepare
from data_io.scale.status import describe, status
from tests.formats.parted import gzip_in_blocks, parted

from .inputs import TOKENIZER, WORDS

OPTIONS = {"tokenizer": str(TOKENIZER), "tokens_per_shard": 3000, "val_fraction": 0.2}


def _documents(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "\n".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))
            for _ in range(rng.randint(1, 4))
        )
        for _ in range(n)
    ]


def _inputs(folder: Path) -> Path:
    """Several files and formats; some documents repeat across files (de-duplication must keep
    the first in input order), some are too short (dropped by the filter)."""
    shared = _documents(30, seed=99)
    folder.mkdir(parents=True)
    (folder / "a.txt").write_text("\n\n".join(_documents(200, 1) + shared[:10]) + "\n")
    with open(folder / "b.jsonl", "w", encoding="utf-8") as f:
        for text in shared + _documents(300, 2) + ["tiny"]:
            f.write(json.dumps({"text": text}) + "\n")
    pq.write_table(
        pa.table({"text": _documents(150, 3) + shared[5:20]}),
        folder / "c.parquet",
        row_group_size=40,
    )
    (folder / "d.txt").write_text("\n\n".join(_documents(50, 4)) + "\n")
    return folder


def _tree(out: Path) -> dict[str, object]:
    """Every file of a prepared folder but the scale-out's own; metadata without its times."""
    files: dict[str, object] = {}
    for path in sorted(out.rglob("*")):
        if not path.is_file() or ".data_io_scale" in path.parts:
            continue
        key = str(path.relative_to(out))
        if path.name == "dataset_metadata.json":
            metadata = json.loads(path.read_text())
            for run in metadata["runs"]:
                run.pop("finished")
            files[key] = metadata
        else:
            files[key] = path.read_bytes()
    return files


def test_prepare_on_workers_writes_what_one_run_writes(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path / "in")
    local = prepare([inputs], tmp_path / "local", progress=False, **OPTIONS)
    assert local.duplicates > 0 and local.documents["val"] > 0
    settings = ExecutorSettings(kind="local", workers=2, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False
    )
    assert outcome.unfinished == []
    assert len(outcome.manifest.units) == 4
    assert outcome.result.duplicates == local.duplicates
    assert sorted(outcome.result.from_parts) == sorted(u.source for u in outcome.manifest.units)
    assert _tree(tmp_path / "scaled") == _tree(tmp_path / "local")
    manifest = Manifest.load(tmp_path / "scaled")
    assert status(manifest).finalized
    assert all(manifest.read_record(u.id, "done")["outputs"] for u in manifest.units)
    # A second input later: incremental, on workers again, still what one run would write.
    (inputs / "e.txt").write_text("\n\n".join(_documents(40, 5)) + "\n")
    prepare([inputs], tmp_path / "local", progress=False, **OPTIONS)
    again = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False
    )
    assert [u.task for u in again.manifest.units] == [str(inputs / "e.txt")]
    assert again.result.from_parts == [str(inputs / "e.txt")]
    assert _tree(tmp_path / "scaled") == _tree(tmp_path / "local")


def test_the_char_tokenizer_is_refused_with_the_reason(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path / "in")
    with pytest.raises(ConfigError, match="char builds its vocabulary"):
        scale_prepare(
            [str(inputs)],
            str(tmp_path / "out"),
            {**OPTIONS, "tokenizer": "char"},
            ExecutorSettings(),
            progress=False,
        )
    assert not (tmp_path / "out").exists()  # the refused plan leaves no folder behind


@pytest.mark.parametrize("mode", ["near", "line"])
def test_near_and_line_dedup_on_workers_write_what_one_run_writes(
    tmp_path: Path, mode: str
) -> None:
    """Units keep each document's MinHash bands (near) or its cleaned text and line hashes
    (line); finalize de-duplicates them in input order. Duplicates across files and across the
    ranges of one file are dropped as in one run."""
    inputs = _inputs(tmp_path / "in")
    base = _documents(60, seed=11)
    edited = [d.replace("\n", " ") + " plus one more word" for d in base if len(d) > 150]
    big = [*base, *_documents(300, seed=12), *edited]
    (inputs / "f.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in big))
    options = {**OPTIONS, "dedup": mode}
    local = prepare([inputs], tmp_path / "local", progress=False, **options)
    assert local.duplicates > (len(edited) // 2 if mode == "near" else 0)
    settings = ExecutorSettings(kind="local", workers=2, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(options), settings, progress=False,
        unit_bytes=(inputs / "f.jsonl").stat().st_size // 6,
    )  # fmt: skip
    assert outcome.unfinished == []
    assert any(u.span["kind"] == "bytes" for u in outcome.manifest.units)
    result = outcome.result
    assert (result.duplicates, result.duplicate_lines) == (local.duplicates, local.duplicate_lines)
    assert _tree(tmp_path / "scaled") == _tree(tmp_path / "local")


def _big_file(kind: str, seed: int) -> tuple[str, bytes]:
    """A file's name and bytes: JSONL rows, or text documents one a line ("lines") or separated
    by blank lines of spaces ("blocks"); documents repeat, and in text some lines are not
    UTF-8."""
    docs = _documents(400, seed=7) + _documents(30, seed=99) * 3
    random.Random(seed).shuffle(docs)
    if kind == "jsonl":
        return "big.jsonl", "".join(json.dumps({"text": d}) + "\n" for d in docs).encode()
    separator = "\n" if kind == "lines" else "\n \u3000\n"
    flat = [d.replace("\n", " ") for d in docs] if kind == "lines" else docs
    return "big.txt", (separator.join(flat) + "\n").encode().replace(b"shard", b"sh\xffard")


@pytest.mark.parametrize("kind", ["blocks", "lines", "jsonl"])
@pytest.mark.parametrize(
    "suffix",
    ["", ".gz", ".zst", ".gz parts", ".zst parts", ".xz parts", ".bz2 parts", ".gz blocks"],
)
def test_a_large_file_cut_into_ranges_writes_what_one_run_writes(
    tmp_path: Path, kind: str, suffix: str
) -> None:
    """One file in many units: an uncompressed one in about twenty byte ranges, a compressed
    one in ranges of its text (each unit decompresses what comes before its range and cuts
    where its neighbours cut), a compressed one of parts that decode on their own (BGZF, zstd
    frames, xz and bzip2 streams) in about twenty ranges of parts, a gzip stream of many deflate
    blocks in about twenty ranges from its entry points. Documents repeat across the ranges;
    some lines are not UTF-8, replaced and counted: the same folder and counts as one run."""
    name, body = _big_file(kind, seed=3)
    suffix, _, how = suffix.partition(" ")
    name += suffix
    compress = {"": bytes, ".gz": gzip.compress, ".zst": zstandard.ZstdCompressor().compress}
    stored = (
        parted(body, suffix, 2000)
        if how == "parts"
        else gzip_in_blocks(body, 2000)
        if how == "blocks"
        else compress[suffix](body)
    )
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / name).write_bytes(stored)
    options = {**OPTIONS, "doc_per_line": kind == "lines"}
    local = prepare([inputs], tmp_path / "local", progress=False, **options)
    settings = ExecutorSettings(kind="local", workers=2, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(options), settings, progress=False,
        unit_bytes=len(stored) // 20 if how == "parts" else len(body) // (6 if suffix and not how else 20),
    )  # fmt: skip
    units = outcome.manifest.units
    assert outcome.unfinished == []
    if how == "blocks":
        assert len(units) >= 15 and {u.span["kind"] for u in units} == {"text"}
        assert sum("point" in u.span for u in units) == len(units) - 1
    elif how == "parts":
        assert len(units) >= 15 and {u.span["kind"] for u in units} == {"parts"}
    elif suffix:
        assert 4 <= len(units) <= MOST_RANGES[suffix[1:]]
        assert {u.span["kind"] for u in units} == {"text"}
    else:
        assert len(units) >= 15 and {u.span["kind"] for u in units} == {"bytes"}
    result = outcome.result
    assert result.from_parts == [str(inputs / name)]
    assert (result.documents_read, result.duplicates, result.invalid_utf8, result.cleaning) == (
        local.documents_read,
        local.duplicates,
        local.invalid_utf8,
        local.cleaning,
    )
    assert local.duplicates > 0 and (kind == "jsonl" or local.invalid_utf8 > 0)
    assert _tree(tmp_path / "scaled") == _tree(tmp_path / "local")


@pytest.mark.parametrize("kind", ["blocks", "jsonl"])
def test_a_bzip2_file_of_one_stream_is_cut_at_its_blocks(tmp_path: Path, kind: str) -> None:
    """A file as ``bzip2`` writes it, one stream of many blocks (100 kB of text each at level 1),
    is cut into ranges of blocks, each unit decoding only its own and the start of the next: the
    same folder and counts as one run."""
    name, _ = _big_file(kind, seed=0)
    body = b"".join(_big_file(kind, seed=seed)[1] for seed in range(12))
    stored = bz2.compress(body, 1)
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / f"{name}.bz2").write_bytes(stored)
    blocks = _core.compressed_parts(str(inputs / f"{name}.bz2"), "bz2")
    assert len(blocks) >= len(body) // 100_000 >= 10
    local = prepare([inputs], tmp_path / "local", progress=False, **OPTIONS)
    settings = ExecutorSettings(kind="local", workers=2, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False,
        unit_bytes=len(stored) // 20,
    )  # fmt: skip
    units = outcome.manifest.units
    assert outcome.unfinished == []
    assert len(units) == len(blocks) and {u.span["kind"] for u in units} == {"parts"}
    result = outcome.result
    assert (result.documents_read, result.duplicates, result.invalid_utf8) == (
        local.documents_read,
        local.duplicates,
        local.invalid_utf8,
    )
    assert local.duplicates > 0
    assert _tree(tmp_path / "scaled") == _tree(tmp_path / "local")


@pytest.mark.parametrize("how", ["text", "parts", "points"])
def test_a_bad_row_in_a_later_range_of_a_compressed_file_is_named_as_in_one_run(
    tmp_path: Path, how: str
) -> None:
    """A range of parts counts its lines from its first part, one from a gzip entry point from
    the point's newlines; its error names the file's line."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = _bad_jsonl(inputs)
    body = path.read_bytes()
    path.unlink()
    stored = (
        parted(body, ".gz", 1000)
        if how == "parts"
        else gzip_in_blocks(body, 1000)
        if how == "points"
        else gzip.compress(body)
    )
    (inputs / "big.jsonl.gz").write_bytes(stored)
    with pytest.raises(Exception) as one_run:
        prepare([inputs], tmp_path / "local", progress=False, **OPTIONS)
    settings = ExecutorSettings(kind="local", workers=1, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False,
        unit_bytes=len(stored if how == "parts" else body) // 6,
    )  # fmt: skip
    assert outcome.unfinished and len(outcome.manifest.units) > 3
    kinds = {u.span["kind"] for u in outcome.manifest.units}
    assert kinds == ({"parts"} if how == "parts" else {"text"})
    assert any("point" in u.span for u in outcome.manifest.units) == (how == "points")
    manifest = Manifest.load(tmp_path / "scaled")
    failures = [manifest.read_record(u.id, "failed") for u in manifest.units]
    messages = [f["error"] for f in failures if f is not None]
    assert "line 251" in str(one_run.value)
    assert any(str(one_run.value) in message for message in messages), messages


@pytest.mark.parametrize("suffix", [".xz", ".bz2", ".zst", ".gz"])
def test_a_corrupt_part_in_a_later_range_is_named_at_its_place_in_the_file(
    tmp_path: Path, suffix: str
) -> None:
    """A unit's range of parts names the damaged place in the file's offsets, as one run does
    (not counted from the range's start), and the part holding it (a unit that decodes past its
    end into the damage, bzip2's a block at a time, names no part: its rest of the file is not
    walked into parts)."""
    from tests.prepare.test_api import damaged_in_the_middle, named_place

    inputs = tmp_path / "in"
    inputs.mkdir()
    part = damaged_in_the_middle(inputs / f"a.txt{suffix}", suffix)
    settings = ExecutorSettings(kind="local", workers=1, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False,
        unit_bytes=part.stop - part.start,
    )  # fmt: skip
    assert outcome.unfinished and len(outcome.manifest.units) > 3
    assert {u.span["kind"] for u in outcome.manifest.units} == {"parts"}
    manifest = Manifest.load(tmp_path / "scaled")
    failures = [manifest.read_record(u.id, "failed") for u in manifest.units]
    messages = [f["error"] for f in failures if f is not None]
    assert any(f"in the part from byte {part.start})" in message for message in messages)
    for message in messages:
        assert named_place(Exception(message), suffix) in part, (message, part)
        assert "in the part" not in message or f"part from byte {part.start})" in message


def test_a_large_parquet_file_cut_into_row_groups_writes_what_one_run_writes(
    tmp_path: Path,
) -> None:
    docs = _documents(500, seed=9) + _documents(40, seed=99) * 2
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = inputs / "big.parquet"
    pq.write_table(pa.table({"text": docs}), path, row_group_size=25)
    local = prepare([inputs], tmp_path / "local", progress=False, **OPTIONS)
    settings = ExecutorSettings(kind="local", workers=2, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False,
        unit_bytes=path.stat().st_size // 8,
    )  # fmt: skip
    units = outcome.manifest.units
    assert outcome.unfinished == [] and len(units) >= 5
    assert {u.span["kind"] for u in units} == {"row_groups"}
    assert outcome.result.from_parts == [str(path)]
    assert outcome.result.duplicates == local.duplicates > 0
    assert _tree(tmp_path / "scaled") == _tree(tmp_path / "local")


def _bad_jsonl(folder: Path) -> Path:
    lines = [json.dumps({"text": d}) for d in _documents(300, seed=8)]
    lines[250] = '{"text": 12}'
    (folder / "big.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "big.jsonl"


def _bad_parquet(folder: Path) -> Path:
    docs: list[str | None] = list(_documents(200, seed=10))
    docs[170] = None
    pq.write_table(pa.table({"text": docs}), folder / "big.parquet", row_group_size=20)
    return folder / "big.parquet"


@pytest.mark.parametrize(
    "write,where", [(_bad_jsonl, "line 251"), (_bad_parquet, "row 170")], ids=["jsonl", "parquet"]
)
def test_a_bad_row_in_a_later_range_is_named_as_in_one_run(
    tmp_path: Path, write: Any, where: str
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    path = write(inputs)
    with pytest.raises(Exception) as one_run:
        prepare([inputs], tmp_path / "local", progress=False, **OPTIONS)
    settings = ExecutorSettings(kind="local", workers=1, threads_per_unit=1)
    outcome = scale_prepare(
        [str(inputs)], str(tmp_path / "scaled"), dict(OPTIONS), settings, progress=False,
        unit_bytes=path.stat().st_size // 6,
    )  # fmt: skip
    assert outcome.unfinished and len(outcome.manifest.units) > 3
    manifest = Manifest.load(tmp_path / "scaled")
    failures = [manifest.read_record(u.id, "failed") for u in manifest.units]
    messages = [f["error"] for f in failures if f is not None]
    assert where in str(one_run.value)
    assert any(str(one_run.value) in message for message in messages), messages


def test_a_plain_run_that_completes_an_unfinished_plan_settles_it(tmp_path: Path) -> None:
    """An interrupted ``--executor`` run, then the plain command: its sources come from the
    parts the units left, and once the output holds every input of the plan (and no unit of it
    may still run), the plan is done as its finalize would leave it: parts removed, status
    "finalized", resume runs nothing. A plain run over some of the plan's inputs only leaves
    the plan (and the other inputs' parts) for later."""
    from data_io.scale.plan import plan_prepare
    from data_io.scale.units import run_unit

    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "out"
    manifest = plan_prepare([str(inputs)], out, dict(OPTIONS))
    manifest.save()
    for unit in manifest.units[:2]:  # the rest "interrupted"
        run_unit(manifest, unit.id, threads=1)
    taken = sorted(unit.source for unit in manifest.units[:2])
    first = next(u.source for u in manifest.units[2:])
    partial = prepare([first], out, progress=False, **OPTIONS)
    assert partial.from_parts == [] and not partial.settled_plan
    assert sorted(p.name for p in (out / ".data_io_scale" / "parts").iterdir()) == sorted(
        u.id for u in manifest.units[:2]
    )
    assert not status(Manifest.load(out)).finalized
    # While a unit of the plan may still run (its process alive here), nothing is settled.
    import os
    import socket

    running = manifest.units[-1].id
    manifest.write_record(running, "started", {"host": socket.gethostname(), "pid": os.getpid()})
    result = prepare([inputs], out, progress=False, **OPTIONS)
    assert sorted(result.from_parts) == taken and not result.settled_plan
    assert (out / ".data_io_scale" / "parts").is_dir()
    manifest.record_path(running, "started").unlink()
    # The next run, with nothing to do, settles it.
    result = prepare([inputs], out, progress=False, **OPTIONS)
    assert result.nothing_to_do and result.settled_plan
    assert not (out / ".data_io_scale" / "parts").exists()
    report = status(Manifest.load(out))
    said = describe(Manifest.load(out), report)
    assert report.finalized and "resume" not in said
    assert f"complete ({len(manifest.units) - 2} units' work was done by the finalize" in said
    # Resuming it runs nothing.
    from data_io.scale import resume

    again = resume(Manifest.load(out), progress=False)
    assert again.finalized_before and again.unfinished == []
    assert not list(manifest.units_dir.glob(f"{manifest.units[-1].id}.*"))
    # The same shards as plain runs in the same order, without any plan.
    prepare([first], tmp_path / "one", progress=False, **OPTIONS)
    prepare([inputs], tmp_path / "one", progress=False, **OPTIONS)
    assert _tree(out) == _tree(tmp_path / "one")
