"""data_io.formats.raw_text and raw_reading: what each kind of raw-text input yields, and the
errors for bad input; each read by the Rust reader and by the Python oracle, which must agree."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from data_io.errors import ConfigError, InputError
from data_io.formats.raw_reading import read_documents
from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
from tests.formats import raw_text_oracle


def read_all(path: Path, **options) -> tuple[list[str], ReadStats]:
    """The documents and counts of the Rust reader; the oracle must give the same, or the same
    error."""
    read = ReadOptions(**options)
    sources, _ = expand_inputs([path], read)
    outcomes = []
    for reader in (read_documents, raw_text_oracle.read_documents):
        stats = ReadStats()
        try:
            outcomes.append(([d for s in sources for d in reader(s, read, stats)], stats, None))
        except (InputError, ConfigError) as error:
            outcomes.append((None, None, error))
    (docs, stats, error), (oracle_docs, oracle_stats, oracle_error) = outcomes
    assert (docs, stats, _comparable(error)) == (
        oracle_docs,
        oracle_stats,
        _comparable(oracle_error),
    )
    if error is not None:
        raise error
    return docs, stats


def _comparable(error: Exception | None) -> str:
    """An error's message, where a corrupt compressed file's decompressor speaks in its own words
    (Rust decompresses, the oracle Python's C libraries): what it says is left out, and where it
    broke (Rust names the byte its decoder had consumed to, the oracle the bytes it had read);
    the file and the format are kept."""
    return re.sub(r"(corrupt \w+ file near byte) \d+ \(.*\);", r"\1 N (...);", str(error))


def test_txt_blocks_between_blank_lines(tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_text("one\ntwo\n\n\n   \nthree\r\nfour\n\nfive", encoding="utf-8")
    docs, stats = read_all(path)
    assert docs == ["one\ntwo", "three\nfour", "five"]
    assert stats.documents == 3


def test_txt_doc_per_line_skips_blank_lines(tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_text("one\n\ntwo\n  \nthree", encoding="utf-8")
    docs, _ = read_all(path, doc_per_line=True)
    assert docs == ["one", "two", "three"]


def test_jsonl_field_and_blank_lines(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "a", "x": 1}\n\n{"body": "no", "text": "b\\nc"}\n', encoding="utf-8")
    assert read_all(path)[0] == ["a", "b\nc"]
    path.write_text('{"body": "x"}\n', encoding="utf-8")
    assert read_all(path, text_field="body")[0] == ["x"]


_COMPRESSORS = [
    (".gz", gzip.compress),
    (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
    (".bz2", bz2.compress),
    (".xz", lzma.compress),
]


@pytest.mark.parametrize(("suffix", "compress"), _COMPRESSORS)
def test_compressed_text_and_jsonl(tmp_path: Path, suffix: str, compress):
    text = "\n\n".join(f"document {i} é" for i in range(5000))
    (tmp_path / f"a.txt{suffix}").write_bytes(compress(text.encode()))
    rows = "".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(3000))
    (tmp_path / f"b.jsonl{suffix}").write_bytes(compress(rows.encode()))
    assert read_all(tmp_path / f"a.txt{suffix}")[0] == [f"document {i} é" for i in range(5000)]
    assert read_all(tmp_path / f"b.jsonl{suffix}")[0] == [f"row {i}" for i in range(3000)]


@pytest.mark.parametrize(("suffix", "compress"), _COMPRESSORS)
def test_concatenated_members_frames_and_streams(tmp_path: Path, suffix: str, compress):
    # `cat a.gz b.gz`; zstd frames, and bzip2 and xz streams as pbzip2 and `xz -T` write them.
    (tmp_path / f"a.txt{suffix}").write_bytes(compress(b"one\n\n") + compress(b"two\n"))
    assert read_all(tmp_path / f"a.txt{suffix}")[0] == ["one", "two"]


@pytest.mark.parametrize(("suffix", "compress"), _COMPRESSORS)
def test_truncated_compressed_file_is_an_error(tmp_path: Path, suffix: str, compress):
    data = compress(("\n\n".join(f"document number {i}" for i in range(20000))).encode())
    path = tmp_path / f"a.txt{suffix}"
    path.write_bytes(data[: len(data) // 2])
    name = suffix[1:]
    with pytest.raises(InputError, match=rf"a\.txt{suffix}: truncated {name} file \(the .* after"):
        read_all(path)


@pytest.mark.parametrize(("suffix", "compress"), _COMPRESSORS)
def test_corrupt_compressed_file_is_an_error_naming_the_file_and_byte(
    tmp_path: Path, suffix: str, compress
):
    data = bytearray(compress(("\n\n".join(f"document {i}" for i in range(20000))).encode()))
    for k in range(40, 80):  # past every format's header
        data[k] ^= 0x5A
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=rf"a\.jsonl{suffix}: corrupt {suffix[1:]} file near byte"):
        read_all(path)


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".bz2", ".xz"])
@pytest.mark.parametrize(
    "head",
    [
        b"plain text\nmore\n",
        b'{"text": "x"}\n',
        b"\x00\x01binary",
        b"tab\there\r\n",
        "é€x".encode(),
    ],
)
def test_a_file_named_compressed_that_is_not_is_named_so_with_its_first_bytes(
    tmp_path: Path, suffix: str, head: bytes
):
    path = tmp_path / f"a.txt{suffix}"
    path.write_bytes(head)
    with pytest.raises(InputError) as info:
        read_all(path)  # the oracle, checking the magic itself, gives the same message
    name = {".gz": "gzip", ".zst": "zstd", ".bz2": "bzip2", ".xz": "xz"}[suffix]
    assert f"a.txt{suffix}: not a {name} file: it begins with {head[:8].hex(' ')}" in str(
        info.value
    )
    assert f"rename it without the {suffix} ending" in str(info.value)


def test_a_zstd_file_starting_with_a_skippable_frame_is_read(tmp_path: Path):
    path = tmp_path / "a.txt.zst"
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"meta"
    path.write_bytes(skippable + zstandard.ZstdCompressor().compress(b"one\n\ntwo\n"))
    assert read_all(path)[0] == ["one", "two"]


def test_corrupt_gzip_is_an_error_naming_the_file(tmp_path: Path):
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00garbage-garbage-garbage")
    with pytest.raises(InputError, match=r"a\.jsonl\.gz: corrupt gz"):
        read_all(path)


def test_parquet_column(tmp_path: Path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"id": [1, 2], "text": ["x", "y"]}), path, row_group_size=1)
    assert read_all(path)[0] == ["x", "y"]
    pq.write_table(pa.table({"text": pa.array(["x"], pa.large_string())}), path)
    assert read_all(path)[0] == ["x"]


def test_parquet_progress_moves_with_the_rows_and_adds_up_to_the_file(tmp_path: Path):
    path = tmp_path / "a.parquet"
    rows = 3 * 2048 + 5  # four batches
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(rows)]}), path)
    read = ReadOptions()
    (source,), _ = expand_inputs([path], read)
    steps: list[int] = []
    docs = list(read_documents(source, read, ReadStats(), steps.append))
    assert len(docs) == rows
    assert len([s for s in steps if s]) >= 4 and all(s >= 0 for s in steps)
    assert sum(steps) == source.size == path.stat().st_size


def test_parquet_without_the_column_or_with_another_type(tmp_path: Path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"body": ["x"]}), path)
    with pytest.raises(InputError, match=r"a\.parquet: no column 'text' \(it has body\)"):
        read_all(path)
    pq.write_table(pa.table({"text": [1, 2]}), path)
    with pytest.raises(InputError, match=r"column 'text' has type int64, not a string"):
        read_all(path)
    pq.write_table(pa.table({"text": ["a", None]}), path)
    with pytest.raises(InputError, match=r"a\.parquet: row 1: column 'text' is null"):
        read_all(path)


def test_a_damaged_parquet_page_names_the_file_and_the_rows(tmp_path: Path):
    """pyarrow raises some damage as OSError ("Invalid BYTE_ARRAY value"), not ArrowException."""
    path = tmp_path / "a.parquet"
    texts = [f"parquet document number {i} with some words" for i in range(3000)]
    pq.write_table(pa.table({"text": texts}), path, row_group_size=500, compression="none")
    data = bytearray(path.read_bytes())
    data[len(data) // 3 : len(data) // 3 + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"a\.parquet: cannot read rows after row \d+ \("):
        read_all(path)


def test_parquet_rows_are_numbered_across_batches_and_row_groups(tmp_path: Path):
    path = tmp_path / "a.parquet"
    texts: list[str | None] = [f"row {i} é" for i in range(2 * 2048 + 10)]
    pq.write_table(pa.table({"text": texts}), path, row_group_size=1500)
    assert read_all(path)[0] == texts
    texts[3000] = None
    pq.write_table(pa.table({"text": texts}), path, row_group_size=1500)
    with pytest.raises(InputError, match=r"a\.parquet: row 3000: column 'text' is null"):
        read_all(path)


def test_parquet_invalid_utf8_is_replaced_and_counted_or_fails_naming_the_row(tmp_path: Path):
    # Parquet writers need not check their strings (pyarrow reads them unchecked).
    path = tmp_path / "a.parquet"
    raw = pa.array([b"ok", b"caf\xe9 \xff", b"fine"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": raw}), path)
    docs, stats = read_all(path)
    assert docs == ["ok", "caf\ufffd \ufffd", "fine"]
    assert stats.invalid_utf8_lines == 1
    with pytest.raises(
        InputError,
        match=r"a\.parquet: row 1: column 'text' holds invalid UTF-8 at byte 3 of its text "
        r"\(invalid continuation byte\); fix the row, or pass --invalid-utf8 replace",
    ):
        read_all(path, invalid_utf8="fail")


def test_parquet_batches_go_to_rust_from_their_buffers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A batch without nulls is handed over from the column's buffers, not as Python strings;
    only a batch Rust refuses goes through the per-text path (which names the row)."""
    import data_io.formats.raw_reading as reading
    from data_io.formats.raw_text import parquet_batch_texts

    per_text: list[int] = []

    def counted(source, options, stats, row, column):  # type: ignore[no-untyped-def]
        per_text.append(row)
        return parquet_batch_texts(source, options, stats, row, column)

    monkeypatch.setattr(reading, "parquet_batch_texts", counted)
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(5000)]}), path)
    assert read_all(path)[0] == [f"row {i}" for i in range(5000)]
    assert per_text == []
    raw = pa.array([b"a"] * 3000 + [b"\xff"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"text": raw}), path)
    assert read_all(path)[0][-1] == "\ufffd"
    assert per_text == [2048], "only the batch holding the bad row"


def test_not_parquet_is_an_error(tmp_path: Path):
    path = tmp_path / "a.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match=r"a\.parquet: not a readable Parquet file"):
        read_all(path)


def test_folders_are_walked_recursively_in_sorted_order(tmp_path: Path):
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "z").mkdir(parents=True)
    (tmp_path / "b" / "1.txt").write_text("b1")
    (tmp_path / "a" / "z" / "2.txt").write_text("az2")
    (tmp_path / "a" / "1.jsonl").write_text('{"text": "a1"}\n')
    (tmp_path / "a" / "README.md").write_text("not an input")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.txt").write_text("hidden")
    read = ReadOptions()
    sources, skipped = expand_inputs([tmp_path], read)
    assert [Path(s.name).relative_to(tmp_path).as_posix() for s in sources] == [
        "a/1.jsonl",
        "a/z/2.txt",
        "b/1.txt",
    ]
    assert skipped == [
        f"{tmp_path / '.hidden'} (hidden folder, not read)",
        f"{tmp_path / 'a' / 'README.md'} (not a type prepare reads)",
    ]


def test_linked_folders_are_walked_once_and_hidden_files_listed(tmp_path: Path):
    """A folder reached through a link is read (as `tokenize` reads it), once, and nothing a
    walk leaves out goes unlisted: hidden files, a second way to a folder, a link back up."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.txt").write_text("linked document")
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "b.txt").write_text("plain document")
    (inputs / ".notes.txt").write_text("hidden")
    (inputs / "linked").symlink_to(tmp_path / "real")
    (inputs / "linked_again").symlink_to(tmp_path / "real")
    (inputs / "up").symlink_to(inputs)
    sources, skipped = expand_inputs([inputs], ReadOptions())
    assert [s.name for s in sources] == [str(inputs / "b.txt"), str(tmp_path / "real" / "a.txt")]
    assert skipped == [
        f"{inputs / '.notes.txt'} (hidden file, not read)",
        f"{inputs / 'linked_again'} (a folder reached again through a link, read once)",
        f"{inputs / 'up'} (a folder reached again through a link, read once)",
    ]


def test_broken_links_and_fifos_in_a_folder_are_listed_as_skipped(tmp_path: Path):
    (tmp_path / "a.txt").write_text("a document")
    (tmp_path / "dangling.txt").symlink_to(tmp_path / "gone.txt")
    os.mkfifo(tmp_path / "pipe.txt")  # reading it would block forever
    (tmp_path / "linked.txt").symlink_to(tmp_path / "a.txt")  # a good link is read
    sources, skipped = expand_inputs([tmp_path], ReadOptions())
    assert [s.name for s in sources] == [str(tmp_path / "a.txt")]
    assert skipped == [
        f"{tmp_path / 'dangling.txt'} (a broken link)",
        f"{tmp_path / 'pipe.txt'} (not a regular file)",
        f"{tmp_path / 'a.txt'} (reached a second time, through a folder or a link)",
    ]


def test_folder_without_inputs_and_unknown_file_are_errors(tmp_path: Path):
    (tmp_path / "x.md").write_text("hello")
    (tmp_path / ".notes.txt").write_text("hidden")
    # The error says what the walk left out, and why.
    said = (
        f"holds no input files .*left out: {tmp_path / '.notes.txt'} (hidden file, not read); "
        f"{tmp_path / 'x.md'} (not a type prepare reads))"
    )
    with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
        expand_inputs([tmp_path], ReadOptions())
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"holds no input files .*\(it is empty\)"):
        expand_inputs([tmp_path / "empty"], ReadOptions())
    with pytest.raises(InputError, match=r"x\.md: cannot tell the format"):
        expand_inputs([tmp_path / "x.md"], ReadOptions())


def test_the_same_input_named_twice_is_an_error(tmp_path: Path):
    (tmp_path / "a.txt").write_text("hello")
    with pytest.raises(ConfigError, match="given twice"):
        expand_inputs([tmp_path / "a.txt", tmp_path / "." / "a.txt"], ReadOptions())


def test_a_file_also_inside_a_named_folder_is_read_once(tmp_path: Path):
    (tmp_path / "a.txt").write_text("hello")
    (tmp_path / "b.txt").write_text("world")
    for order in ([tmp_path / "a.txt", tmp_path], [tmp_path, tmp_path / "a.txt"]):
        sources, skipped = expand_inputs(order, ReadOptions())
        assert sorted(s.name for s in sources) == [str(tmp_path / n) for n in ("a.txt", "b.txt")]
        assert skipped == [
            f"{tmp_path / 'a.txt'} (reached a second time, through a folder or a link)"
        ]


def test_invalid_utf8_replace_counts_and_fail_names_line_and_offset(tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"good line\n\nbad \xff here\nand \xc3\x28 again\n")
    docs, stats = read_all(path)
    assert docs == ["good line", "bad \ufffd here\nand \ufffd( again"]
    assert stats.invalid_utf8_lines == 2
    with pytest.raises(InputError, match=r"a\.txt: line 3: invalid UTF-8 at byte offset 15 "):
        read_all(path, invalid_utf8="fail")


def test_invalid_utf8_in_compressed_file_names_the_decompressed_offset(tmp_path: Path):
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"text": "ok"}\n{"text": "\xfe"}\n'))
    with pytest.raises(InputError, match=r"line 2: invalid UTF-8 at byte offset 25 of the decomp"):
        read_all(path, invalid_utf8="fail")
    assert read_all(path)[0] == ["ok", "\ufffd"]


def test_lone_surrogate_in_json_follows_the_policy(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "a\\ud800b"}\n', encoding="utf-8")
    docs, stats = read_all(path)
    assert docs == ["a\ufffdb"] and stats.invalid_utf8_lines == 1
    with pytest.raises(InputError, match=r"line 1: the text holds a lone surrogate"):
        read_all(path, invalid_utf8="fail")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"body": "x", "id": 3}', r"line 2: no field 'text' \(the row has body, id\)"),
        ('{"text": 5}', r"line 2: field 'text' is a number, not a string"),
        ('{"text": null}', r"line 2: field 'text' is null, not a string"),
        ('{"text": ["a"]}', r"line 2: field 'text' is an array, not a string"),
        ('["text"]', r"line 2: expected a JSON object"),
        ('{"text": "a"', r"line 2: not valid JSON at column 13 \(Expecting ',' delimiter\);"),
        ('{"text": "a", "text": "b"}', r"line 2: the field 'text' is given 2 times in the row"),
        ('{"te\\u0078t": "a", "text": "b"}', r"line 2: the field 'text' is given 2 times"),
        ('{"text": 1, "x": 2, "text": "b"}', r"line 2: the field 'text' is given 2 times"),
    ],
)
def test_bad_jsonl_rows_name_file_and_line(tmp_path: Path, line: str, message: str):
    path = tmp_path / "a.jsonl"
    path.write_text('{"text": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"a\.jsonl: " + message):
        read_all(path)


def test_a_field_named_again_inside_a_nested_object_is_no_duplicate(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"text": "a\\nb", "meta": {"text": 1, "text": 2}}\n{"x": "\\"text\\"", "text": "c"}\n',
        encoding="utf-8",
    )
    assert read_all(path)[0] == ["a\nb", "c"]


@pytest.mark.parametrize("content", [b"", b"\n\n  \n", b"\xef\xbb\xbf"])
def test_empty_input_is_an_error(tmp_path: Path, content: bytes):
    path = tmp_path / "a.txt"
    path.write_bytes(content)
    # A byte-order mark alone is empty too: the mark is not text.
    with pytest.raises(InputError, match=r"a\.txt: empty input \(no documents\)"):
        read_all(path)


def test_empty_compressed_file_is_an_error(tmp_path: Path):
    path = tmp_path / "a.jsonl.gz"
    path.write_bytes(gzip.compress(b""))
    with pytest.raises(InputError, match="empty input"):
        read_all(path)


def test_save_to_disk_folder_is_read_through_datasets(tmp_path: Path):
    import datasets

    datasets.Dataset.from_dict({"text": ["alpha", "beta"], "n": [1, 2]}).save_to_disk(
        tmp_path / "saved"
    )
    sources, _ = expand_inputs([tmp_path / "saved"], ReadOptions())
    assert [s.kind for s in sources] == ["datasets"]
    assert read_all(tmp_path / "saved")[0] == ["alpha", "beta"]
    with pytest.raises(InputError, match=r"row 0: no field 'body'"):
        read_all(tmp_path / "saved", text_field="body")


def _column_feeds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Rows in each batch the reader took as an Arrow column (not as Python strings)."""
    from data_io.formats import raw_reading

    taken: list[int] = []
    feed = raw_reading.DocumentReader._feed_column

    def counted(self, source, row, column):
        taken.append(len(column))
        return feed(self, source, row, column)

    monkeypatch.setattr(raw_reading.DocumentReader, "_feed_column", counted)
    return taken


@pytest.mark.parametrize("large", [False, True])
def test_a_saved_datasets_string_column_is_read_as_arrow_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool
):
    import datasets

    texts = [f"document {i}: caf\u00e9 \u4e2d\u6587 " + "word " * (i % 17) for i in range(5000)]
    features = datasets.Features(
        {
            "text": datasets.Value("large_string" if large else "string"),
            "n": datasets.Value("int64"),
        }
    )
    datasets.Dataset.from_dict(
        {"text": texts, "n": list(range(5000))}, features=features
    ).save_to_disk(tmp_path / "saved")
    taken = _column_feeds(monkeypatch)
    docs, stats = read_all(tmp_path / "saved")  # the oracle reads the rows as dicts
    assert docs == texts and stats.documents == 5000
    assert sum(taken) == 5000 and len(taken) > 1  # every row from Arrow, in several batches


def test_a_null_or_a_non_string_in_a_datasets_column_names_its_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    import datasets

    texts: list[str | None] = [f"document number {i}" for i in range(3000)]
    texts[2050] = None  # in the second batch
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(tmp_path / "nulls")
    with pytest.raises(InputError, match=r"row 2050: field 'text' is null, not a string"):
        read_all(tmp_path / "nulls")
    datasets.Dataset.from_dict({"text": list(range(10))}).save_to_disk(tmp_path / "ints")
    taken = _column_feeds(monkeypatch)
    with pytest.raises(InputError, match=r"row 0: field 'text' is a number, not a string"):
        read_all(tmp_path / "ints")  # not a string feature: the rows as dicts, checked one by one
    assert taken == []


def _hub_jsonl_folder(folder: Path, rows: list[dict]) -> Path:
    """A folder as ``hf download`` leaves it, holding one JSONL file of ``rows``."""
    (folder / "data").mkdir(parents=True)
    (folder / ".cache" / "huggingface").mkdir(parents=True)
    with open(folder / "data" / "train.jsonl", "w") as out:
        out.writelines(json.dumps(row) + "\n" for row in rows)
    return folder


@pytest.mark.parametrize("features_known", [True, False])
def test_json_rows_of_a_datasets_source_are_read_as_arrow_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, features_known: bool
):
    """JSON rows: pyarrow infers the text column's type as it reads each batch, so the column
    goes over as Arrow whether or not ``datasets`` names the features ahead."""
    import datasets

    texts = [f"row {i}: caf\u00e9 \u4e2d\u6587 \\n " + "word " * (i % 13) for i in range(5000)]
    folder = _hub_jsonl_folder(tmp_path / "hub", [{"text": t, "n": i} for i, t in enumerate(texts)])
    if not features_known:  # as for JSON rows streamed with no dataset card
        monkeypatch.setattr(datasets.IterableDataset, "features", property(lambda self: None))
    taken = _column_feeds(monkeypatch)
    docs, stats = read_all(folder, split="train")  # the oracle reads the rows as dicts
    assert docs == texts and stats.documents == 5000
    assert sum(taken) == 5000 and len(taken) > 1


def test_json_rows_whose_text_is_not_a_string_name_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    rows = [{"text": i, "n": i} for i in range(10)]
    taken = _column_feeds(monkeypatch)
    with pytest.raises(InputError, match=r"row 0: field 'text' is a number, not a string"):
        read_all(_hub_jsonl_folder(tmp_path / "ints", rows), split="train")
    assert taken == []
    rows = [{"text": f"document {i}", "n": i} for i in range(3000)]
    rows[2500]["text"] = None
    with pytest.raises(InputError, match=r"row 2500: field 'text' is null, not a string"):
        read_all(_hub_jsonl_folder(tmp_path / "nulls", rows), split="train")
    with pytest.raises(InputError, match=r"row 0: no field 'body' \(the row has text, n\)"):
        read_all(_hub_jsonl_folder(tmp_path / "other", rows[:5]), split="train", text_field="body")


def test_json_rows_of_mixed_types_are_decoded_before_they_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """``datasets`` types a column of strings and numbers as JSON, each value kept as JSON text
    in Arrow: a number is still named as a number, never read as the text "12345"."""
    rows: list[dict] = [{"text": f"document number {i}, long enough", "n": i} for i in range(10)]
    rows[5]["text"] = 12345
    taken = _column_feeds(monkeypatch)
    with pytest.raises(InputError, match=r"row 5: field 'text' is a number, not a string"):
        read_all(_hub_jsonl_folder(tmp_path / "mixed", rows), split="train")
    assert taken == []
    rows[5]["text"] = None  # strings and a null: a string column, its null named
    with pytest.raises(InputError, match=r"row 5: field 'text' is null, not a string"):
        read_all(_hub_jsonl_folder(tmp_path / "null", rows), split="train")


def test_hf_download_folder_is_read_through_datasets(tmp_path: Path):
    hub = Path(__file__).resolve().parents[2] / "data_io" / "example_data" / "raw" / "hub"
    folder = tmp_path / "gsm8k"
    shutil.copytree(hub / "openai" / "gsm8k", folder)
    plain, _ = read_all(folder, text_field="question")  # a plain folder: its Parquet file
    (folder / ".cache" / "huggingface").mkdir(parents=True)  # what `hf download` leaves
    sources, _ = expand_inputs([folder], ReadOptions())
    assert [s.kind for s in sources] == ["datasets"]
    docs, _ = read_all(folder, text_field="question", hf_config="main")
    assert docs == plain and len(docs) > 0


def test_unreachable_hub_id_says_how_to_use_a_local_copy(monkeypatch: pytest.MonkeyPatch):
    import datasets.config
    import huggingface_hub.constants

    # Offline, as on a machine without network, without waiting for the retries to give up.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError, match=r"hf download no-such-org/no-such-set"):
        read_all("no-such-org/no-such-set")  # type: ignore[arg-type]


def test_hub_id_fails_at_once_when_the_hub_does_not_answer(monkeypatch: pytest.MonkeyPatch):
    """No ~20 s of datasets' retries: the reachability probe answers first, at expand time."""
    from data_io.util import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    asked = []
    monkeypatch.setattr(hub, "_probe", lambda url: asked.append(url) or f"{url} does not answer")
    with pytest.raises(InputError) as caught:
        expand_inputs(["no-such-org/no-such-set"], ReadOptions())
    message = str(caught.value)
    assert "not reachable" in message and "does not answer" in message
    assert "hf download no-such-org/no-such-set --repo-type dataset" in message
    assert "HF_HUB_OFFLINE=1" in message
    assert len(asked) == 1


@pytest.mark.parametrize(
    ("suffix", "compress"),
    [
        ("", lambda b: b),
        (".gz", gzip.compress),
        (".zst", lambda b: zstandard.ZstdCompressor().compress(b)),
        (".bz2", bz2.compress),
    ],
)
def test_progress_counts_the_file_as_stored(tmp_path: Path, suffix: str, compress):
    """The bar moves by the file's bytes on disk (compressed ones for a compressed file, read
    by Rust for gzip and zstd, by Python for bzip2), to its size exactly."""
    text = "".join(json.dumps({"text": f"row {i} " * 20}) + "\n" for i in range(3000))
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(compress(text.encode()))
    steps: list[int] = []
    read = ReadOptions()
    (source,), _ = expand_inputs([path], read)
    docs = list(read_documents(source, read, ReadStats(), steps.append))
    assert docs == [f"row {i} " * 20 for i in range(3000)]
    assert sum(steps) == path.stat().st_size
    assert all(step >= 0 for step in steps)
