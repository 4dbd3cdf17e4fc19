"""The Rust reading of ``prepare`` (``reading.DocumentReader`` and ``_core.prepare_batch``)
against the Python reader (``tests/formats/raw_text_oracle.py``): the same documents, the
same counts and the same first error, on generated text and JSONL files full of what the rules
handle (blank lines of Unicode whitespace, carriage returns, bytes that are not UTF-8, a
byte-order mark, rows only Python reads), read in pieces and batches of every size."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from data_io import _core
from data_io.errors import InputError
from data_io.formats import raw_reading as reading
from data_io.formats.raw_reading import DocumentReader
from data_io.formats.raw_text import ReadOptions, ReadStats, Source, expand_inputs
from data_io.prepare.normalize import CleanOptions, CleanStats
from tests.formats import raw_text_oracle
from tests.prepare.clean_oracle import clean_batch

# Pieces of a line of text: words, whitespace Python sees and UTF-8 does not make plain, line
# ends, carriage returns, and bytes that are not UTF-8 (each kind of bad sequence).
TEXT_PIECES = [
    b"word",
    b"Wort ",
    b" ",
    b"\t",
    b"\r",
    b"\r\n",
    b"\n",
    b"\n\n",
    "\u00a0".encode(),
    "\u3000".encode(),
    "\u2028".encode(),
    "\x85".encode(),
    b"\x1c",
    b"\x0b",
    "é日🙂".encode(),
    b"\xff",
    b"\xe2\x82",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf4\x90\x80\x80",
]


class _Bar:
    def describe(self, _name: str) -> None:
        pass

    def advance_bytes(self, _n: int) -> None:
        pass


def _oracle(sources: list[Source], options: ReadOptions, *, empty: bool = False) -> tuple[Any, ...]:
    """The documents as Python reads them (empty ones dropped, as prepare's cleaning does,
    unless ``empty``)."""
    return _read_with(raw_text_oracle.read_documents, sources, options, empty)


def _read_with(
    read: Any, sources: list[Source], options: ReadOptions, empty: bool
) -> tuple[Any, ...]:
    stats = ReadStats()
    documents: list[str] = []
    try:
        for source in sources:
            documents.extend(read(source, options, stats))
    except InputError as err:
        return ("error", str(err))
    if not empty:
        documents = clean_batch(
            documents, CleanOptions(normalize=False, filter=False), CleanStats()
        )
    counts = (stats.documents, stats.text_chars, stats.invalid_utf8_lines, stats.empty_sources)
    return (documents, counts)


def _rust(sources: list[Source], options: ReadOptions) -> tuple[Any, ...]:
    stats = ReadStats()
    reader = DocumentReader(options, stats, _Bar())  # type: ignore[arg-type]
    documents: list[str] = []
    read = [0, 0, 0]
    try:
        for batch in reader.batches(sources):
            _, texts, hashes, counts, _, _ = _core.prepare_batch(
                batch,
                text_field=options.text_field,
                fail_invalid=options.invalid_utf8 == "fail",
                normalize=False,
                filter=False,
                min_line_chars=0,
                min_doc_chars=0,
                resolve=reader.resolve,
            )
            assert texts is not None and len(hashes) == len(texts)
            documents.extend(texts)
            for k, name in enumerate(("documents", "text_chars", "invalid_utf8_lines")):
                read[k] += counts[name]
    except InputError as err:
        return ("error", str(err))
    invalid = read[2] + stats.invalid_utf8_lines  # rows Python read count there
    return (documents, (read[0], read[1], invalid, stats.empty_sources))


def _sources(folder: Path, files: dict[str, bytes], options: ReadOptions) -> list[Source]:
    for name, data in files.items():
        path = folder / name
        path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return expand_inputs([folder], options)[0]


def _agree(
    tmp: Path, files: dict[str, bytes], options: ReadOptions, monkeypatch: Any, chunk: int
) -> None:
    monkeypatch.setattr(raw_text_oracle, "_CHUNK_BYTES", chunk)  # the oracle's pieces
    monkeypatch.setattr(reading, "_READ_BYTES", chunk)  # the others: Rust's reads
    monkeypatch.setattr(reading, "BATCH_BYTES", chunk * 3)
    sources = _sources(tmp, files, options)
    assert _rust(sources, options) == _oracle(sources, options)
    # What a tokenizer's training reads: every document, empty ones too.
    production = _read_with(reading.read_documents, sources, options, empty=True)
    assert production == _oracle(sources, options, empty=True)


text_lines = st.lists(st.sampled_from(TEXT_PIECES), max_size=8).map(b"".join)
text_files = st.lists(text_lines, min_size=1, max_size=12).map(b"\n".join)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@example(body=b"\xe2\x82\r", bom=False, per_line=False, fail=True, chunk=1, gz=False)
@example(body=b"c\xe2\x82\r\nmore", bom=False, per_line=True, fail=True, chunk=64, gz=False)
@given(
    body=text_files,
    bom=st.booleans(),
    per_line=st.booleans(),
    fail=st.booleans(),
    chunk=st.sampled_from([1, 5, 64, 1 << 20]),
    gz=st.booleans(),
)
def test_text_files_read_the_same(
    tmp_path_factory: Any,
    monkeypatch: Any,
    body: bytes,
    bom: bool,
    per_line: bool,
    fail: bool,
    chunk: int,
    gz: bool,
) -> None:
    tmp = tmp_path_factory.mktemp("txt")
    data = (b"\xef\xbb\xbf" if bom else b"") + body
    # A second file after the first: documents and errors run on across sources.
    files = {"a.txt" + (".gz" if gz else ""): data, "b.txt": b"tail document\n\n\xffbad\n"}
    options = ReadOptions(doc_per_line=per_line, invalid_utf8="fail" if fail else "replace")
    _agree(tmp, files, options, monkeypatch, chunk)


# JSONL rows: plain ones (the fast path), ones serde_json takes, and every kind Python reads.
json_text = st.text(
    alphabet=st.sampled_from(["a", " ", "\n", "\r", '"', "\\", "é", "🙂", "\x00", "\u2028"]),
    max_size=12,
)
ROW_KINDS = [
    lambda t: json.dumps({"text": t}).encode(),
    lambda t: json.dumps({"text": t}, ensure_ascii=False).encode(),
    lambda t: json.dumps({"id": 7, "text": t, "meta": {"a": [1, None, 2.5]}}).encode(),
    lambda t: b' {"text" : ' + json.dumps(t).encode() + b" }\r",
    lambda t: b'{"text": "' + t.encode("utf-8", "replace") + b'\xff"}',
    lambda t: b'{"text": 3}',
    lambda t: b'{"other": "x"}',
    lambda t: b'{"text": "a", "text": "b"}',
    lambda t: b'{"text": "a", "text": 1}',
    lambda t: b'{"text": "x\\ud800y"}',
    lambda t: b'{"text": "ok", "v": NaN}',
    lambda t: b'["text"]',
    lambda t: b'{"text": "ok"} trailing',
    lambda t: b"not json",
    lambda t: b"   ",
    lambda t: "\u00a0".encode(),
    lambda t: "\u00a0{}".encode(),
    lambda t: b"",
    # Beyond what Python's parsers read, or near it: Python decides (rows.rs's beyond_python).
    lambda t: b'{"text": "deep", "m": ' + b"[" * 1100 + b"]" * 1100 + b"}",
    lambda t: b'{"text": "deepish", "m": ' + b"[" * 600 + b"]" * 600 + b"}",
    lambda t: b'{"text": "long number", "n": ' + b"7" * 5000 + b"}",
    lambda t: b'{"text": ' + b"7" * 5000 + b"}",
]
rows = st.tuples(st.sampled_from(range(len(ROW_KINDS))), json_text).map(
    lambda kind_text: ROW_KINDS[kind_text[0]](kind_text[1])
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(rows, min_size=1, max_size=10),
    fail=st.booleans(),
    chunk=st.sampled_from([3, 64, 1 << 20]),
    gz=st.booleans(),
)
def test_jsonl_files_read_the_same(
    tmp_path_factory: Any, monkeypatch: Any, lines: list[bytes], fail: bool, chunk: int, gz: bool
) -> None:
    tmp = tmp_path_factory.mktemp("jsonl")
    files = {"a.jsonl" + (".gz" if gz else ""): b"\n".join(lines)}
    options = ReadOptions(invalid_utf8="fail" if fail else "replace")
    _agree(tmp, files, options, monkeypatch, chunk)


def test_an_empty_source_named_alone_fails_after_the_errors_before_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"fine\n\nnot \xff fine\n")
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\n \n")
    options = ReadOptions(invalid_utf8="fail")
    sources = expand_inputs([bad, empty], options)[0]
    result = _rust(sources, options)
    assert result == _oracle(sources, options)
    assert "line 3: invalid UTF-8 at byte offset 10" in result[1]
    sources = expand_inputs([empty], options)[0]
    assert _rust(sources, options) == (
        "error",
        f"{empty}: empty input (no documents); remove it or pass a source with text",
    )


def test_parquet_sources_give_the_oracles_documents(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = [f"document {i} " * (i % 5) for i in range(5000)]
    pq.write_table(pa.table({"text": texts}), tmp_path / "a.parquet")
    options = ReadOptions()
    sources = expand_inputs([tmp_path / "a.parquet"], options)[0]
    result = _rust(sources, options)
    assert result == _oracle(sources, options)
    assert len(result[0]) == 4000


@pytest.mark.parametrize("text_field", ["text", "body"])
def test_rows_python_reads_name_their_file_and_line(tmp_path: Path, text_field: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "a", "body": "b"}\n\n{"text": 1, "body": 2}\n')
    options = ReadOptions(text_field=text_field)
    sources = expand_inputs([path], options)[0]
    result = _rust(sources, options)
    assert result == _oracle(sources, options)
    assert result[1].startswith(f"{path}: line 3: field {text_field!r} is a number, not a string")
