"""Reading raw-text sources in Rust: sources to batches of documents (``DocumentReader``, what
``prepare`` hands to ``_core.prepare_batch``), or to the documents' texts (``read_documents``,
what a tokenizer's training counts).

A text or JSONL file (or a byte range of an uncompressed one) is read by Rust straight into the
batch's buffer (``RawDocuments.read_file``), gzip, zstd, bzip2 and xz ones decompressed on the
way: on as many threads as the encoder's when the file is made of parts that decode on their
own (``rust/reader/frames``), and a range of such a file (``PartsRange``) from its parts alone.
Cutting the text into documents, decoding, and parsing JSONL rows happen in Rust (``rust/prepare/``,
``_core.RawDocuments`` and ``_core.prepare_batch``). Parquet files are read by pyarrow and
handed over batch by batch from the text column's buffers (no Python string per document);
``datasets`` sources are read by their library and handed over as texts. A JSONL row the Rust
path does not take is read by Python's rules (``raw_text.jsonl_row_text``).

The rules are those of the Python reader that was ``prepare``'s before (the oracle of
tests/prepare/test_read_rust.py, tests/formats/raw_text_oracle.py), errors included: the first
problem in read order is the one reported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from data_io import _core
from data_io.errors import InputError
from data_io.formats.raw_text import (
    ByteRange,
    PartsRange,
    ReadOptions,
    ReadStats,
    RowGroups,
    Source,
    TextRange,
    datasets_batches,
    empty_input_error,
    jsonl_row_text,
    parquet_batch_texts,
    parquet_batches,
)
from data_io.util.arrow_strings import string_layout

__all__ = ["BATCH_BYTES", "DocumentReader", "read_documents"]

# A batch: enough text for every thread of the pool to take many chunks, little enough that
# reading the next one overlaps its encoding without holding much memory.
BATCH_BYTES = 8 << 20
_READ_BYTES = 1 << 20  # of text per read of a file Rust reads


class Progress(Protocol):
    """Where the reader reports: the source it starts, and the bytes it read."""

    def describe(self, name: str) -> None: ...
    def advance_bytes(self, count: int) -> None: ...


class DocumentReader:
    """Reads sources into batches (``_core.RawDocuments``) for ``_core.prepare_batch``.

    ``stats`` gets what is known while reading (sources without documents, rows Python read);
    the documents' own counts come back from ``prepare_batch``."""

    def __init__(self, options: ReadOptions, stats: ReadStats, bar: Progress) -> None:
        self.options = options
        self.stats = stats
        self._bar = bar
        # Room for a batch and the piece that fills it: no reallocation while reading.
        self._documents = _core.RawDocuments(BATCH_BYTES + (2 << 20))
        self._names: list[str] = []  # by the index Rust gives each source

    def batches(self, sources: list[Source]) -> Iterator[_core.RawDocuments]:
        """The documents of ``sources``, in order, in batches of about ``BATCH_BYTES``.

        On a reading error (a truncated file, an empty input named on the command line) the
        documents read before it come out first: one of them may hold an earlier error."""
        documents = self._documents
        for source in sources:
            self._bar.describe(Path(source.name).name)
            first_line = source.span.first_line if isinstance(source.span, ByteRange) else 1
            documents.begin_source(
                source.name, self._format(source), source.compression is not None, first_line
            )
            self._names.append(source.name)
            try:
                yield from self._read(source)
            except Exception:  # an earlier document's error, if any, comes first
                documents.end_source()
                if len(documents):
                    yield documents.take()
                raise
            if documents.end_source() == 0:
                if source.explicit:
                    if len(documents):
                        yield documents.take()
                    raise empty_input_error(source)
                self.stats.empty_sources.append(source.name)
        if len(documents):
            yield documents.take()

    def _format(self, source: Source) -> str:
        if source.kind == "txt":
            return "lines" if self.options.doc_per_line else "blocks"
        return "jsonl" if source.kind == "jsonl" else "texts"

    def _read(self, source: Source) -> Iterator[_core.RawDocuments]:
        documents = self._documents
        if source.kind in ("txt", "jsonl"):
            span = source.span
            if isinstance(span, ByteRange):
                documents.open_file(source.name, span.start, span.end)
            elif isinstance(span, TextRange):  # the last range reads on to the text's end
                end = None if span.end == span.total else span.end
                point = None if span.point is None else span.point.as_tuple()
                documents.open_file(source.name, span.start, end, source.compression, point=point)
            elif isinstance(span, PartsRange):
                end = None if span.end == span.size else span.end
                documents.open_file(source.name, span.start, end, source.compression, parts=True)
            else:
                documents.open_file(source.name, compression=source.compression)
            shown = 0  # the bar counts the file's bytes, compressed ones for a compressed file
            while documents.read_file(_READ_BYTES):
                self._bar.advance_bytes(documents.file_bytes_read - shown)
                shown = documents.file_bytes_read
                if documents.ready_bytes >= BATCH_BYTES:
                    yield documents.take()
            self._bar.advance_bytes(documents.file_bytes_read - shown)
            return
        if source.kind == "parquet":
            for row, column in parquet_batches(source, self.options, self._bar.advance_bytes):
                self._feed_column(source, row, column)
                if documents.ready_bytes >= BATCH_BYTES:
                    yield documents.take()
            return
        first = source.span.first_row if isinstance(source.span, RowGroups) else 0
        for row, texts in datasets_batches(source, self.options):
            if isinstance(texts, list):
                documents.feed_texts(texts, first + row)
            else:  # the text column's Arrow array
                self._feed_column(source, first + row, texts)
            if documents.ready_bytes >= BATCH_BYTES:
                yield documents.take()

    def _feed_column(self, source: Source, row: int, column: Any) -> None:
        """One Parquet (or ``datasets``) batch's texts, handed over from the column's buffers
        (no Python string per text); a column with nulls, or one Rust refuses (invalid UTF-8),
        goes through ``parquet_batch_texts``, whose error names the row as it always did."""
        if column.null_count == 0:
            data, offsets = string_layout(column)
            try:
                self._documents.feed_utf8(data, offsets, row)
                return
            except InputError:
                pass
        texts = parquet_batch_texts(source, self.options, self.stats, row, column)
        self._documents.feed_texts(texts, row)

    def resolve(self, line: str, source: int, number: int) -> str:
        """The text of a JSONL row Rust left to Python (``rust/prepare/rows.rs``), or its
        error. Called from the encoding thread, one batch at a time."""
        where = f"{self._names[source]}: line {number}"
        return jsonl_row_text(line, self.options.text_field, where, self.options, self.stats)


class _Bytes:
    """A ``Progress`` that passes the bytes read to a callback."""

    def __init__(self, callback: Callable[[int], None] | None) -> None:
        self._callback = callback

    def describe(self, name: str) -> None:
        pass

    def advance_bytes(self, count: int) -> None:
        if self._callback is not None:
            self._callback(count)


def read_documents(
    source: Source,
    options: ReadOptions,
    stats: ReadStats,
    progress: Callable[[int], None] | None = None,
) -> Iterator[str]:
    """The documents of ``source`` as read (not cleaned: empty ones too), in order, counted in
    ``stats``; a source named on the command line without any document is an error, one
    found in a folder is listed in ``stats.empty_sources``. ``progress`` gets the bytes read."""
    reader = DocumentReader(options, stats, _Bytes(progress))
    for batch in reader.batches([source]):
        _, texts, _, counts, _, _ = _core.prepare_batch(
            batch,
            text_field=options.text_field,
            fail_invalid=options.invalid_utf8 == "fail",
            normalize=False,
            filter=False,
            min_line_chars=0,
            min_doc_chars=0,
            resolve=reader.resolve,
            keep_empty=True,
        )
        stats.documents += counts["documents"]
        stats.text_chars += counts["text_chars"]
        stats.invalid_utf8_lines += counts["invalid_utf8_lines"]
        yield from texts or []
