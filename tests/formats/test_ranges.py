"""Byte ranges of a large file (``formats.ranges``): read one after the other, they give what
the whole file gives — the same documents, counts and first error, with the same line numbers
and byte offsets — on generated text and JSONL files full of what the reading rules handle."""

from __future__ import annotations

import base64
import bz2
import dataclasses
import gzip
import itertools
import json
import lzma
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from data_io import _core
from data_io.errors import ConfigError, InputError
from data_io.formats.ranges import MOST_RANGES, document_ranges, in_two_rounds
from data_io.formats.raw_text import (
    GzipPoint,
    PartsRange,
    ReadOptions,
    Source,
    TextRange,
    empty_input_error,
    expand_inputs,
)
from data_io.prepare.pipeline import encoder_threads
from tests.formats.parted import gzip_in_blocks, parted
from tests.prepare.test_read_rust import _rust, rows, text_files


def _ranged(source: Source, unit_bytes: int, options: ReadOptions) -> tuple[Any, ...]:
    """The ranges' documents and counts run on, as one read; the first error ends it."""
    ranges = document_ranges(source, unit_bytes, options.doc_per_line)
    assert ranges, "the file is larger than a unit: it is cut"
    last = ranges[-1]
    end = last.total if isinstance(last, TextRange) else source.size
    assert ranges[0].start == 0 and ranges[-1].end == end
    assert all(a.end == b.start for a, b in itertools.pairwise(ranges))
    documents: list[str] = []
    counts = [0, 0, 0]
    for span in ranges:
        read = _rust([dataclasses.replace(source, span=span, explicit=False)], options)
        if read[0] == "error":
            return read
        documents += read[0]
        counts = [a + b for a, b in zip(counts, read[1][:3], strict=True)]
    if counts[0] == 0:  # as the file named alone: no document in any range is an error
        return ("error", str(empty_input_error(source)))
    return documents, (*counts, [])


def _agree(tmp: Path, name: str, data: bytes, options: ReadOptions, unit_bytes: int) -> None:
    (tmp / name).write_bytes(data)
    (source,) = expand_inputs([tmp / name], options)[0]
    whole = _rust([source], options)
    if source.size <= unit_bytes or not document_ranges(source, unit_bytes, options.doc_per_line):
        return  # no boundary past the first unit: read whole
    assert _ranged(source, unit_bytes, options) == whole


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(body=b"a\n \n\xffb\n\nc", bom=True, per_line=False, fail=True, unit=3)
@given(
    body=text_files,
    bom=st.booleans(),
    per_line=st.booleans(),
    fail=st.booleans(),
    unit=st.integers(1, 40),
)
def test_text_ranges_read_as_the_whole_file(
    tmp_path_factory: Any, body: bytes, bom: bool, per_line: bool, fail: bool, unit: int
) -> None:
    data = (b"\xef\xbb\xbf" if bom else b"") + body
    options = ReadOptions(doc_per_line=per_line, invalid_utf8="fail" if fail else "replace")
    _agree(tmp_path_factory.mktemp("txt"), "a.txt", data, options, unit)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(rows, min_size=2, max_size=12), fail=st.booleans(), unit=st.integers(1, 60))
def test_jsonl_ranges_read_as_the_whole_file(
    tmp_path_factory: Any, lines: list[bytes], fail: bool, unit: int
) -> None:
    options = ReadOptions(invalid_utf8="fail" if fail else "replace")
    _agree(tmp_path_factory.mktemp("jsonl"), "a.jsonl", b"\n".join(lines), options, unit)


def test_the_passes_of_several_gzip_streams_run_together_and_cut_as_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A planner's files cut in two rounds: the gzip streams' passes asked in the first run
    in one call (a file a thread), and every file's ranges are those it gets alone."""
    rng = random.Random(9)
    texts = [
        "".join(
            f"{' '.join(f'w{rng.randrange(30000)}' for _ in range(rng.randrange(3, 60)))}\n\n"
            for _ in range(8000)
        )
        for _ in range(3)
    ]
    paths = [tmp_path / "a.txt.gz", tmp_path / "b.txt", tmp_path / "c.txt.gz"]
    paths[0].write_bytes(gzip.compress(texts[0].encode()))
    paths[1].write_text(texts[1])
    paths[2].write_bytes(gzip.compress(texts[2].encode(), compresslevel=9))
    sources = [expand_inputs([path], ReadOptions())[0][0] for path in paths]
    unit = len(texts[0]) // 12
    alone = [document_ranges(source, unit, doc_per_line=False) for source in sources]
    assert all(len(ranges) > MOST_RANGES["gz"] for ranges in alone)
    calls: list[list[tuple[Any, int]]] = []
    together = _core.gzip_entry_points_of

    def counted(requests: list[tuple[Any, int]]) -> Any:
        calls.append(requests)
        return together(requests)

    monkeypatch.setattr(_core, "gzip_entry_points_of", counted)
    monkeypatch.setattr(_core, "gzip_entry_points", None)  # not one by one
    monkeypatch.setattr("data_io.formats.ranges._SAY_PASS_BYTES", 1)  # "big files"
    cut = in_two_rounds(
        len(sources),
        lambda k, passes: document_ranges(sources[k], unit, False, 0, passes),
    )
    assert cut == alone
    assert [[Path(path).name for path, _ in call] for call in calls] == [["a.txt.gz", "c.txt.gz"]]
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and "a.txt.gz" in said[0] and "c.txt.gz" in said[1], said
    # A damaged stream among them is named, whichever thread found it.
    paths[2].write_bytes(paths[2].read_bytes()[:-300])
    with pytest.raises(InputError, match=r"c\.txt\.gz: truncated gz file"):
        in_two_rounds(
            len(sources),
            lambda k, passes: document_ranges(sources[k], unit, False, 0, passes),
        )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    body=text_files,
    per_line=st.booleans(),
    fail=st.booleans(),
    unit=st.integers(1, 40),
    suffix=st.sampled_from([".gz", ".zst", ".bz2", ".xz"]),
)
def test_the_text_ranges_of_a_compressed_file_read_as_the_whole_file(
    tmp_path_factory: Any, body: bytes, per_line: bool, fail: bool, unit: int, suffix: str
) -> None:
    compress = {
        ".gz": gzip.compress,
        ".zst": zstandard.ZstdCompressor().compress,
        ".bz2": bz2.compress,
        ".xz": lzma.compress,
    }[suffix]
    options = ReadOptions(doc_per_line=per_line, invalid_utf8="fail" if fail else "replace")
    _agree(tmp_path_factory.mktemp("txt"), "a.txt" + suffix, compress(body), options, unit)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(body=b"a\n \n\xffb\n\nc", per_line=False, fail=True, unit=3, chunk=2)
@given(
    body=text_files,
    per_line=st.booleans(),
    fail=st.booleans(),
    unit=st.integers(1, 40),
    chunk=st.integers(1, 30),
)
def test_the_ranges_of_a_gzip_file_from_its_entry_points_read_as_the_whole_file(
    tmp_path_factory: Any, body: bytes, per_line: bool, fail: bool, unit: int, chunk: int
) -> None:
    """A gzip stream of many deflate blocks is cut at entry points (each range decompresses its
    own text only), and its ranges read as the whole file does."""
    options = ReadOptions(doc_per_line=per_line, invalid_utf8="fail" if fail else "replace")
    folder = tmp_path_factory.mktemp("gz")
    stored = gzip_in_blocks(body, chunk)
    _agree(folder, "a.txt.gz", stored, options, unit)
    (source,) = expand_inputs([folder / "a.txt.gz"], options)[0]
    count = round(len(body) / unit)  # ranges of text (the estimate is the length here)
    every = -(-len(stored) // max(4 * count, 1))  # gzip_ranges' candidates
    points, total, _ = _core.gzip_entry_points(str(source.path), every)
    assert total == len(body)
    ranges = document_ranges(source, unit, per_line)
    if count > 1 and [p for p in points if p[1] + 1 < total]:
        assert all(isinstance(r, TextRange) and r.point for r in ranges[1:]), ranges


def test_a_gzip_point_survives_a_plan_and_a_damaged_one_is_refused() -> None:
    point = GzipPoint(bit=8 * 1000 + 3, text=5000, newlines=40, member_text=0, crc=123,
                      window=b"some text " * 3000)  # fmt: skip
    record = json.loads(json.dumps(point.record()))
    assert GzipPoint.from_record(record) == point
    assert len(record["window"]) < len(point.window) // 10  # deflated: a plan stays small
    for damaged in (
        {**record, "window": "not base64!"},
        {**record, "window": base64.b64encode(b"not deflate").decode()},
        {k: v for k, v in record.items() if k != "crc"},
        {**record, "bit": "x"},
        {**record, "crc": 1 << 32},
        {**record, "member_text": 5001},
        "not a record",
    ):
        with pytest.raises(ConfigError, match="gzip entry point in the plan is"):
            GzipPoint.from_record(damaged)


def test_a_gzip_file_is_cut_at_entry_points_and_refused_when_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``gzip``'s own output (one member, blocks of about 16,000 symbols) is cut into about
    ``text / unit_bytes`` ranges at entry points, however few MOST_RANGES allows a stream cut by
    its text; the plan's pass over a damaged or truncated file names the place."""
    rng = random.Random(5)
    text = "".join(
        f"{' '.join(f'w{rng.randrange(30000)}' for _ in range(rng.randrange(3, 60)))}\n\n"
        for _ in range(8000)
    ).encode()
    stored = gzip.compress(text)
    path = tmp_path / "a.txt.gz"
    path.write_bytes(stored)
    (source,) = expand_inputs([path], ReadOptions())[0]
    monkeypatch.setattr("data_io.formats.ranges._SAY_PASS_BYTES", len(stored))  # "a big file"
    ranges = document_ranges(source, len(text) // 12, doc_per_line=False)
    assert MOST_RANGES["gz"] < len(ranges) <= 12
    said = capsys.readouterr().err
    assert f"decompressing {path} (0.0 GB) once to find where about 12 units" in said, said
    assert ranges[0].point is None and all(r.point for r in ranges[1:])  # type: ignore[union-attr]
    assert _ranged(source, len(text) // 12, ReadOptions()) == _rust([source], ReadOptions())
    monkeypatch.setattr("data_io.formats.ranges.MOST_GZIP_RANGES", 3)  # a plan stays small
    assert len(document_ranges(source, len(text) // 12, doc_per_line=False)) == 3
    # A unit whose file was cut short before its point (past the plan's size check) says so.
    last = ranges[-1]
    assert last.point is not None  # type: ignore[union-attr]
    path.write_bytes(stored[: last.point.bit // 8])  # type: ignore[union-attr]
    kind, message = _rust([dataclasses.replace(source, span=last, explicit=False)], ReadOptions())
    assert kind == "error" and "before the plan's entry point at byte" in message, message
    damaged = bytearray(stored)
    damaged[len(stored) // 2 : len(stored) // 2 + 64] = bytes(64)
    path.write_bytes(bytes(damaged))
    with pytest.raises(InputError, match=r"a\.txt\.gz: corrupt gz file near byte \d+"):
        document_ranges(source, len(text) // 12, doc_per_line=False)
    path.write_bytes(stored[: len(stored) // 2])
    with pytest.raises(InputError, match=r"truncated gz file"):
        document_ranges(source, len(text) // 12, doc_per_line=False)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(body=b"a\n \n\xffb\n\nc", per_line=False, fail=True, unit=3, chunk=2, suffix=".xz")
@given(
    body=text_files,
    per_line=st.booleans(),
    fail=st.booleans(),
    unit=st.integers(1, 400),
    chunk=st.integers(1, 30),
    suffix=st.sampled_from([".gz", ".zst", ".xz", ".bz2"]),
)
def test_the_ranges_of_a_file_of_parts_read_as_the_whole_file(
    tmp_path_factory: Any,
    body: bytes,
    per_line: bool,
    fail: bool,
    unit: int,
    chunk: int,
    suffix: str,
) -> None:
    """Parts of a few bytes of text: documents span parts, a range may hold none, and an
    error's line and byte offset in a later range are the whole file's."""
    options = ReadOptions(doc_per_line=per_line, invalid_utf8="fail" if fail else "replace")
    data = parted(body, suffix, chunk)
    _agree(tmp_path_factory.mktemp("parts"), "a.txt" + suffix, data, options, unit)


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".xz", ".bz2"])
def test_a_file_of_parts_is_cut_at_part_starts_and_read_whole_on_two_lanes(
    tmp_path: Path, suffix: str
) -> None:
    blocks = [f"block {i} {i * 7919 % 1000}" for i in range(3000)]
    text = "\n\n".join(blocks).encode()
    (tmp_path / ("a.txt" + suffix)).write_bytes(parted(text, suffix, 1000))
    (source,) = expand_inputs([tmp_path], ReadOptions())[0]
    starts = _core.compressed_parts(str(source.path), source.compression)
    assert len(starts) >= len(text) // 1000 and starts[0] == 0
    ranges = document_ranges(source, source.size // 7, doc_per_line=False)
    # No cap on their number: each range decompresses only its own parts.
    assert len(ranges) == 7 and all(isinstance(r, PartsRange) for r in ranges)
    assert {r.start for r in ranges} <= set(starts) and ranges[-1].end == source.size
    # Among many files, too: it is cut as an uncompressed file would be.
    assert len(document_ranges(source, source.size // 7, False, run_bytes=source.size * 99)) == 7
    assert document_ranges(source, source.size, doc_per_line=False) == []
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.txt").write_bytes(text)
    expected = _rust(expand_inputs([plain], ReadOptions())[0], ReadOptions())
    for threads in (1, 12):  # 12: every format decompresses on its lanes
        with encoder_threads(threads):
            assert _rust([source], ReadOptions()) == expected


def test_a_damaged_part_is_named_and_a_file_that_changed_since_the_plan_is_refused(
    tmp_path: Path,
) -> None:
    text = b"".join(b"document %d\n" % i for i in range(20000))
    path = tmp_path / "a.txt.zst"
    data = bytearray(parted(text, ".zst", 10000))
    path.write_bytes(bytes(data))
    starts = _core.compressed_parts(str(path), "zst")
    data[starts[5] + 40] ^= 0xFF
    path.write_bytes(bytes(data))
    (source,) = expand_inputs([path], ReadOptions())[0]
    for threads in (1, 12):  # 12: every format decompresses on its lanes
        with encoder_threads(threads):
            kind, message = _rust([source], ReadOptions())
        assert kind == "error" and "corrupt zst file" in message, message
        assert "re-download or re-compress it" in message
    # A file of bzip2 streams cut short: its last block has no end.
    cut = tmp_path / "b.txt.bz2"
    cut.write_bytes(parted(text, ".bz2", 10000)[:-30])
    assert len(_core.compressed_parts(str(cut), "bz2")) > 5
    (short,) = expand_inputs([cut], ReadOptions())[0]
    for threads in (1, 12):  # 12: every format decompresses on its lanes
        with encoder_threads(threads):
            kind, message = _rust([short], ReadOptions())
        assert kind == "error" and "truncated bz2 file" in message, message
    moved = dataclasses.replace(source, span=PartsRange(starts[5] + 1, source.size, source.size))
    kind, message = _rust([moved], ReadOptions())
    assert kind == "error" and f"no compressed part starts at byte {starts[5] + 1}" in message


def test_compressed_files_are_cut_in_a_few_ranges_of_their_text_small_ones_not(
    tmp_path: Path,
) -> None:
    blocks = [f"block {i} {i * 7919 % 1000}" for i in range(300)]
    text = "\n\n".join(blocks).encode()
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(text))
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(b"one\n\ntwo\n"))
    big, small = expand_inputs([tmp_path], ReadOptions())[0]
    ranges = document_ranges(big, len(text) // 3, doc_per_line=False)
    assert [(r.start, r.end, r.total) for r in ranges] == [  # type: ignore[union-attr]
        (k * len(text) // 3, (k + 1) * len(text) // 3, len(text)) for k in range(3)
    ]
    assert len(document_ranges(big, 64, doc_per_line=False)) == MOST_RANGES["gz"]
    assert document_ranges(small, 64, doc_per_line=False) == []
    # Cut only while it holds an eighth of the run's input: among many files it stays whole.
    assert len(document_ranges(big, 64, False, run_bytes=big.size * 8)) == MOST_RANGES["gz"]
    assert document_ranges(big, 64, False, run_bytes=big.size * 8 + 1) == []
    assert document_ranges(big, len(text), doc_per_line=False) == []
    # A bzip2 file of one block (up to 900 kB of text) is one part: it stays whole.
    (tmp_path / "c.txt.bz2").write_bytes(bz2.compress(text))
    (slow,) = expand_inputs([tmp_path / "c.txt.bz2"], ReadOptions())[0]
    assert document_ranges(slow, 64, doc_per_line=False) == []


def test_small_files_are_read_whole_and_parquet_by_row_groups(tmp_path: Path) -> None:
    blocks = [f"block {i} {i * 7919 % 1000}" for i in range(300)]
    pq.write_table(pa.table({"text": blocks}), tmp_path / "b.parquet", row_group_size=10)
    (tmp_path / "c.txt").write_bytes(b"one\n\ntwo\n")
    sources = expand_inputs([tmp_path], ReadOptions())[0]
    assert [s.size > 64 for s in sources] == [True, False]
    parquet, small = sources
    assert document_ranges(small, 64, doc_per_line=False) == []
    runs = document_ranges(parquet, 64, doc_per_line=False)
    assert len(runs) > 3 and runs[0].start == 0 and runs[-1].end == runs[-1].total == 30
    assert all(a.end == b.start for a, b in itertools.pairwise(runs))
    assert [r.first_row for r in runs] == [10 * r.start for r in runs]
    texts = [_rust([dataclasses.replace(parquet, span=r, explicit=False)], ReadOptions())[0]
             for r in runs]  # fmt: skip
    assert [t for part in texts for t in part] == blocks
    assert document_ranges(parquet, parquet.size, doc_per_line=False) == []


def test_a_text_file_is_cut_only_after_a_blank_line(tmp_path: Path) -> None:
    blocks = [f"block {i}\nits second line\nits third" for i in range(50)]
    path = tmp_path / "a.txt"
    path.write_text("\n\n".join(blocks) + "\n")
    (source,) = expand_inputs([path], ReadOptions())[0]
    ranges = document_ranges(source, 100, doc_per_line=False)
    assert len(ranges) > 10
    data = path.read_bytes()
    for span in ranges[1:]:
        assert data[: span.start].endswith(b"\n\n")
        assert span.first_line == data[: span.start].count(b"\n") + 1
