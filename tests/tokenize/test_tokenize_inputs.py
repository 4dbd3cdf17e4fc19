"""Which input files data_io.tokenize reads: any-case .jsonl/.parquet, .jsonl.gz and
.jsonl.zst streamed; every other visible file listed as skipped; BOMs; corrupt archives."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import zstandard

from data_io import _core
from data_io.errors import ConfigError, InputError
from data_io.tokenize import tokenize
from tests.formats.parted import parted
from tests.tokenize_oracle import expected_layout, load_task

ROWS = [
    {"condition": "cot", "instruction": "What is 2+2?", "response": "4"},
    {"condition": "", "instruction": "Say ünïcode 日本", "response": "ok"},
]
JSONL = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS).encode()


def zstd(data: bytes) -> bytes:
    """A standard zstd frame (pyarrow's codec; the zstandard module is not installed)."""
    return pa.compress(data, codec="zstd", asbytes=True)


def run(rows: Path, out: Path, tokenizer: Path, **kwargs):
    return tokenize([rows], out, tokenizer_path=tokenizer, progress=False, **kwargs)


def test_compressed_and_any_case_files_are_read_like_plain_jsonl(
    small_tokenizer: Path, tmp_path: Path
):
    rows = tmp_path / "rows"
    (rows / "a").mkdir(parents=True)
    (rows / "a" / "b.jsonl.gz").write_bytes(gzip.compress(JSONL))
    (rows / "c.jsonl.zst").write_bytes(zstd(JSONL))
    (rows / "UPPER.JSONL").write_bytes(JSONL)
    (rows / "plain.jsonl").write_bytes(JSONL)
    result = run(rows, tmp_path / "out", small_tokenizer)
    names = sorted(f.task for f in result.files)
    # The task keeps the full file name, compression suffix included.
    assert names == ["UPPER.JSONL", "a__b.jsonl.gz", "c.jsonl.zst", "plain.jsonl"]
    want = expected_layout(small_tokenizer, ROWS)
    for name in names:
        got = load_task(tmp_path / "out" / name)
        for key, array in want.items():
            np.testing.assert_array_equal(got[key].astype(np.uint64), array, err_msg=name)
    assert result.skipped_files == []


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_compressed_file_of_parts_reads_on_every_thread_and_stays_incremental(
    small_tokenizer: Path, tmp_path: Path, suffix: str
):
    """BGZF members or zstd frames (``rust/reader/frames``): decompressed on the encoder's
    threads, the same task as one stream; its hash is taken apart, so a second run finds it
    unchanged."""
    many = [
        {**row, "instruction": f"{row['instruction']} #{i}"} for i in range(400) for row in ROWS
    ]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in many).encode()
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / f"parts.jsonl{suffix}").write_bytes(parted(body, suffix, 1000))
    (rows / f"one.jsonl{suffix}").write_bytes(
        gzip.compress(body) if suffix == ".gz" else zstd(body)
    )
    out = tmp_path / "out"
    # 12 threads: past what one decoding thread keeps up with (``frames::lanes_for``).
    result = run(rows, out, small_tokenizer, threads=12)
    want = expected_layout(small_tokenizer, many)
    for name in (f"parts.jsonl{suffix}", f"one.jsonl{suffix}"):
        got = load_task(out / name)
        for key, array in want.items():
            np.testing.assert_array_equal(got[key].astype(np.uint64), array, err_msg=name)
    assert {f.status for f in result.files} == {"tokenized"}
    again = run(rows, out, small_tokenizer, threads=12)
    assert {f.status for f in again.files} == {"unchanged"}


def test_other_files_are_listed_as_skipped_and_hidden_ones_ignored(
    small_tokenizer: Path, tmp_path: Path
):
    rows = tmp_path / "rows"
    (rows / "sub").mkdir(parents=True)
    (rows / ".git").mkdir()
    (rows / "ok.jsonl").write_bytes(JSONL)
    for name in ["rows.json", "sub/rows.jsonl.bz2", "README.md", ".hidden.txt", ".git/config"]:
        (rows / name).write_text("x")
    result = run(rows, tmp_path / "out", small_tokenizer)
    assert result.skipped_files == [
        str(rows / "README.md"),
        str(rows / "rows.json"),
        str(rows / "sub" / "rows.jsonl.bz2"),
    ]


def test_a_byte_order_mark_is_stripped(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + JSONL)
    (rows / "bom.jsonl.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + JSONL))
    result = run(rows, tmp_path / "out", small_tokenizer)
    assert [f.rows for f in result.files] == [2, 2]
    want = expected_layout(small_tokenizer, ROWS)["tokens"]
    np.testing.assert_array_equal(load_task(tmp_path / "out" / "bom.jsonl")["tokens"], want)


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_a_corrupt_archive_names_the_file_and_the_line_reached(
    small_tokenizer: Path, tmp_path: Path, suffix: str
):
    rows = tmp_path / "rows"
    rows.mkdir()
    many = JSONL * 5000
    packed = gzip.compress(many) if suffix == ".jsonl.gz" else zstd(many)
    path = rows / f"broken{suffix}"
    path.write_bytes(packed[: len(packed) // 2])
    (rows / "fine.jsonl").write_bytes(JSONL)
    with pytest.raises(InputError) as info:
        run(rows, tmp_path / "out", small_tokenizer, on_error="skip")
    kind = "gzip" if suffix == ".jsonl.gz" else "zstd"
    pattern = (
        rf"{re.escape(str(path))}: truncated {kind} data after line (\d+): the compressed "
        r"stream ends without its end marker after (\d+) bytes \("
    )
    said = re.search(pattern, str(info.value))
    assert said, info.value
    assert int(said[2]) == len(packed) // 2 and int(said[1]) < 5000 * len(ROWS)
    assert not (tmp_path / "out" / f"broken{suffix}").exists()
    assert (tmp_path / "out" / "fine.jsonl" / "tokens.npy").exists()


def checksum_flipped(path: Path, suffix: str, parts: bool) -> range:
    """Write to ``path`` rows compressed as ``suffix`` (one gzip member or zstd frame, or
    ``parts`` of 20 kB of text) whose middle part's stored checksum (gzip's CRC-32, zstd's
    content checksum) has a byte flipped: its data decodes, its check fails. The file offsets
    of that part."""
    many = [
        {**row, "instruction": f"{row['instruction']} #{i}"} for i in range(3000) for row in ROWS
    ]
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in many).encode()
    if parts:
        data = bytearray(parted(body, suffix, 20_000))
    elif suffix == ".gz":
        data = bytearray(gzip.compress(body))
    else:
        data = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(body))
    path.write_bytes(bytes(data))
    starts = [*_core.compressed_parts(str(path), suffix[1:]), len(data)]
    assert (len(starts) > 5) == parts
    k = (len(starts) - 1) // 2 if parts else 0
    part = range(starts[k], starts[k + 1])
    data[part.stop - (8 if suffix == ".gz" else 1)] ^= 0xFF
    path.write_bytes(bytes(data))
    return part


@pytest.mark.parametrize("parts", [False, True])
@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_a_failed_checksum_names_the_byte_and_the_part_it_is_in(
    small_tokenizer: Path, tmp_path: Path, suffix: str, parts: bool
):
    """The place is the file's byte the decoder was at, as prepare names it (with the part it
    lies in where the file's parts are read on lanes: 12 threads), beside the last line read."""
    rows = tmp_path / "rows"
    rows.mkdir()
    path = rows / f"sums.jsonl{suffix}"
    part = checksum_flipped(path, suffix, parts)
    with pytest.raises(InputError) as info:
        run(rows, tmp_path / "out", small_tokenizer, threads=12 if parts else 1)
    kind = "gzip" if suffix == ".gz" else "zstd"
    pattern = (
        rf"{re.escape(str(path))}: corrupt {kind} data near byte (\d+) of the file, after "
        r"line \d+ \((.*)\); re-create or re-download the file"
    )
    said = re.search(pattern, str(info.value))
    assert said, info.value
    assert int(said[1]) in part, (str(info.value), part)
    assert "checksum" in said[2]
    if parts:
        assert said[2].endswith(f", in the part from byte {part.start}")


def test_a_file_that_is_not_gzip_at_all_is_an_error(small_tokenizer: Path, tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "fake.jsonl.gz").write_bytes(JSONL)
    with pytest.raises(InputError, match=r"fake\.jsonl\.gz: not a gzip file: it begins with"):
        run(rows, tmp_path / "out", small_tokenizer)


def test_a_task_name_longer_than_a_file_name_is_refused_before_any_work(
    small_tokenizer: Path, tmp_path: Path
):
    # Each name is legal (130 bytes); joined with "__" the task name is 268 bytes.
    rows = tmp_path / "rows"
    deep = rows / ("d" * 130)
    deep.mkdir(parents=True)
    (rows / "short.jsonl").write_bytes(JSONL)
    (deep / ("f" * 130 + ".jsonl")).write_bytes(JSONL)
    out = tmp_path / "out"
    with pytest.raises(
        ConfigError,
        match=r"ffff\.jsonl: its task folder would be named .*, 268 "
        r"bytes, and a file name may have at most 255 .*shallower folder",
    ):
        run(rows, out, small_tokenizer)
    assert not out.exists() or not any(out.iterdir())  # short.jsonl was not written either
    # A name that fits, however near the limit with the working folder's prefix and pid.
    (deep / ("f" * 130 + ".jsonl")).rename(deep / ("f" * 117 + ".jsonl"))
    run(rows, out, small_tokenizer)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        ["d" * 130 + "__" + "f" * 117 + ".jsonl", "short.jsonl", "tokenizer_info.json"]
    )


def test_one_file_reached_through_a_symbolic_link_is_refused_not_tokenized_twice(
    small_tokenizer: Path, tmp_path: Path
):
    rows, other = tmp_path / "rows", tmp_path / "other"
    rows.mkdir()
    other.mkdir()
    (other / "x.jsonl").write_bytes(JSONL)
    (rows / "dirlink").symlink_to(other)
    (rows / "link.jsonl").symlink_to(other / "x.jsonl")
    with pytest.raises(ConfigError, match=r"are the same file .*reached through a symbolic link"):
        run(rows, tmp_path / "out", small_tokenizer)


def test_zero_rows_in_total_fails_unless_the_folder_has_other_tasks(
    small_tokenizer: Path, tmp_path: Path
):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "empty.jsonl").write_bytes(b"")
    (rows / "bad.jsonl").write_bytes(b"{oops\n[1]\n")
    with pytest.raises(InputError, match="no rows at all") as info:
        run(rows, tmp_path / "out", small_tokenizer, on_error="skip")
    assert "all 2 rows were bad and skipped" in str(info.value)
    # With tasks of another input folder kept in the output, an empty input is fine.
    other = tmp_path / "other"
    other.mkdir()
    (other / "good.jsonl").write_bytes(JSONL)
    out = tmp_path / "out2"
    run(other, out, small_tokenizer)
    result = run(rows, out, small_tokenizer, on_error="skip")
    assert [k.split(" (")[0] for k in result.kept] == ["good.jsonl"]


def _invalid_utf8_strings(values: list[bytes]) -> pa.Array:
    """A string array holding the bytes as given, unvalidated (as careless writers do)."""
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))]
    )


@pytest.mark.parametrize("dictionary", [True, False])
def test_invalid_utf8_in_parquet_names_the_row_and_skip_keeps_the_rest(
    small_tokenizer: Path, tmp_path: Path, dictionary: bool
):
    import pyarrow.parquet as pq

    rows = tmp_path / "rows"
    rows.mkdir()
    texts = [f"question {i}".encode() for i in range(6)]
    texts[4] = b"caf\xe9"
    table = pa.table(
        {
            "condition": ["cot"] * 6,
            "instruction": _invalid_utf8_strings(texts),
            "response": [f"answer {i}" for i in range(6)],
        }
    )
    path = rows / "latin1.parquet"
    pq.write_table(table, path, row_group_size=2, use_dictionary=dictionary)
    with pytest.raises(InputError) as info:
        run(rows, tmp_path / "out", small_tokenizer)
    assert f'{path}:row 4 (counted from 0): field "instruction" is not valid UTF-8' in str(
        info.value
    )
    result = run(rows, tmp_path / "out", small_tokenizer, on_error="skip")
    (report,) = result.files
    assert (report.rows, report.bad_rows) == (5, 1)
    good = [
        {"condition": "cot", "instruction": f"question {i}", "response": f"answer {i}"}
        for i in range(6)
        if i != 4
    ]
    np.testing.assert_array_equal(
        load_task(tmp_path / "out" / "latin1.parquet")["tokens"],
        expected_layout(small_tokenizer, good)["tokens"],
    )
