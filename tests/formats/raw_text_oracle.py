"""The Python reader of raw text that ``prepare`` ran before its reading moved to Rust (issue
26), kept as the oracle of ``data_io.formats.raw_reading``: the documents of a text or JSONL
source cut, decoded and parsed in Python (``str.split``, ``bytes.decode``, a regex for blank
lines), with the same errors; Parquet and ``datasets`` sources through ``raw_text``'s batch and
row readers."""

from __future__ import annotations

import bz2
import lzma
import re
import zlib
from collections.abc import Iterator
from typing import Any

from data_io.errors import ConfigError, InputError
from data_io.formats.raw_text import (
    ByteRange,
    ReadOptions,
    ReadStats,
    Source,
    datasets_documents,
    empty_input_error,
    jsonl_row_text,
    parquet_batch_texts,
    parquet_batches,
)

__all__ = ["line_pieces", "read_documents"]

_Progress = Any
_CHUNK_BYTES = 1 << 20


def read_documents(
    source: Source, options: ReadOptions, stats: ReadStats, progress: _Progress | None = None
) -> Iterator[str]:
    """The documents of ``source``, in order; a source without any document is an error."""
    before = stats.documents
    if source.kind == "txt":
        documents = _txt_documents(source, options, stats, progress)
    elif source.kind == "jsonl":
        documents = _jsonl_documents(source, options, stats, progress)
    elif source.kind == "parquet":
        documents = _parquet_documents(source, options, stats, progress)
    else:
        documents = datasets_documents(source, options)
    for text in documents:
        stats.documents += 1
        stats.text_chars += len(text)
        yield text
    if stats.documents == before:
        if not source.explicit:
            stats.empty_sources.append(source.name)
            return
        raise empty_input_error(source)


def _parquet_documents(
    source: Source, options: ReadOptions, stats: ReadStats, progress: _Progress | None
) -> Iterator[str]:
    """Every row's text as a Python string, batch by batch (the production reader hands clean
    batches over from their buffers instead)."""
    for row, column in parquet_batches(source, options, progress):
        yield from parquet_batch_texts(source, options, stats, row, column)


def _numbered_pieces(
    source: Source, progress: _Progress | None
) -> Iterator[tuple[int, int, bytes]]:
    """(number of the first line from 1, its byte offset in the decompressed text, bytes):
    ``line_pieces`` with the lines numbered."""
    number = source.span.first_line if source.span is not None else 1
    for offset, piece in line_pieces(source, progress):
        yield number, offset, piece
        number += piece.count(b"\n")


def _piece_lines(
    number: int, offset: int, piece: bytes, source: Source, options: ReadOptions, stats: ReadStats
) -> Iterator[str]:
    """The lines of ``piece`` (the last one empty when it ends with a newline), decoded whole at
    C speed; a piece with invalid UTF-8 is decoded lazily line by line instead, so that its
    error (or count of replaced lines) names the exact line and byte offset, and comes after
    the errors of the lines before it."""
    try:
        return iter(piece.decode("utf-8").split("\n"))
    except UnicodeDecodeError:
        return _each_line(number, offset, piece, source, options, stats)


def _piece_text(
    number: int, offset: int, piece: bytes, source: Source, options: ReadOptions, stats: ReadStats
) -> str:
    """``piece`` decoded (as the lines of ``_piece_lines`` joined, without splitting it when
    it is valid)."""
    try:
        return piece.decode("utf-8")
    except UnicodeDecodeError:
        return "\n".join(_each_line(number, offset, piece, source, options, stats))


def _each_line(
    number: int, offset: int, piece: bytes, source: Source, options: ReadOptions, stats: ReadStats
) -> Iterator[str]:
    for index, line in enumerate(piece.split(b"\n")):
        yield _decode(line, f"{source.name}: line {number + index}", offset, source, options, stats)
        offset += len(line) + 1


def _decode(
    line: bytes, where: str, offset: int, source: Source, options: ReadOptions, stats: ReadStats
) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as err:
        if options.invalid_utf8 == "fail":
            raise InputError(
                f"{where}: invalid UTF-8 at byte offset {offset + err.start} of the "
                f"{'decompressed ' if source.compression else ''}text ({err.reason}); fix the "
                "file, or pass --invalid-utf8 replace to replace bad bytes with U+FFFD and count "
                "them"
            ) from err
        stats.invalid_utf8_lines += 1
        return line.decode("utf-8", "replace")


def _text_lines(
    source: Source, options: ReadOptions, stats: ReadStats, progress: _Progress | None
) -> Iterator[str]:
    """The decoded text in pieces of whole lines joined by newlines (no final newline), each
    line without one trailing carriage return (CRLF files)."""
    for number, offset, piece in _numbered_pieces(source, progress):
        text = _piece_text(number, offset, piece, source, options, stats)
        if "\r" in text:
            # Removing the CR of each CRLF drops one trailing CR per line, except on the
            # file's last line when it has no newline: that one is dropped here.
            text = text.replace("\r\n", "\n")
            if text.endswith("\r"):
                text = text[:-1]
        yield text[:-1] if text.endswith("\n") else text


# A run of blank lines (only whitespace, as str.strip sees it: re's \s is the same set), with
# the newline that ends the line before it; the text is padded with a newline at each end.
_BLANK_LINES = re.compile(r"\n(?:[^\S\n]*\n)+")


def _txt_documents(
    source: Source, options: ReadOptions, stats: ReadStats, progress: _Progress | None
) -> Iterator[str]:
    """A document per line (``doc_per_line``) or per block of lines between blank lines."""
    open_block: list[str] = []  # lines of the block that runs on from earlier pieces
    for text in _text_lines(source, options, stats, progress):
        if options.doc_per_line:
            yield from [line for line in text.split("\n") if line.strip()]
            continue
        parts = _BLANK_LINES.split(f"\n{text}\n")
        if len(parts) == 1:  # no blank line: the whole piece continues the open block
            open_block.append(text)
            continue
        head, *middle, tail = parts
        if head:
            open_block.append(head[1:])
        if open_block:
            yield "\n".join(open_block)
        yield from middle
        open_block = [tail[:-1]] if tail else []
    if open_block:
        yield "\n".join(open_block)


def _jsonl_documents(
    source: Source, options: ReadOptions, stats: ReadStats, progress: _Progress | None
) -> Iterator[str]:
    field = options.text_field
    for number, offset, piece in _numbered_pieces(source, progress):
        lines = _piece_lines(number, offset, piece, source, options, stats)
        for index, line in enumerate(lines):
            if line.strip():  # a blank line (often the last) holds no row
                where = f"{source.name}: line {number + index}"
                yield jsonl_row_text(line, field, where, options, stats)


# -- reading a file: chunks of its (decompressed) bytes, then pieces of whole lines ------------
def _decompressor(compression: str | None) -> Any:
    if compression == "gz":
        return zlib.decompressobj(wbits=31)  # gzip header; a new object per gzip member
    if compression == "zst":
        import zstandard  # optional: zstandard, only for .zst data

        return zstandard.ZstdDecompressor().decompressobj()
    if compression == "bz2":
        return bz2.BZ2Decompressor()
    if compression == "xz":
        return lzma.LZMADecompressor()
    raise AssertionError(compression)


# Each format's name, ending, and the magic bytes its files begin with (zstd's skippable frames,
# 0x184D2A5?, little-endian, are also a zstd file's start).
_MAGIC = {
    "gz": ("gzip", "1f 8b", [b"\x1f\x8b"]),
    "zst": (
        "zstd",
        "28 b5 2f fd",
        [b"\x28\xb5\x2f\xfd"] + [bytes([0x50 + k]) + b"\x2a\x4d\x18" for k in range(16)],
    ),
    "bz2": ("bzip2", '42 5a 68 ("BZh")', [b"BZh"]),
    "xz": ("xz", "fd 37 7a 58 5a 00", [b"\xfd7zXZ\x00"]),
}


def _not_compressed(source: Source, head: bytes) -> InputError | None:
    """A file named as compressed whose first bytes begin no file of its format."""
    name, magic, starts = _MAGIC[source.compression]
    n = len(head)
    if any(head[: len(start)] == start[:n] for start in starts):
        return None
    shown = head[:8]
    try:
        text = shown.decode("utf-8")
        printable = all(c.isprintable() or c.isspace() for c in text)
    except UnicodeDecodeError:
        printable = False
    as_text = f", text {_rust_debug(text)}" if printable else ""
    return InputError(
        f"{source.name}: not a {name} file: it begins with {shown.hex(' ')}{as_text}, not "
        f"{name}'s magic bytes {magic}; if it is not compressed, rename it without the "
        f".{source.compression} ending, else it is damaged: re-download or re-compress it"
    )


def _rust_debug(text: str) -> str:
    """``text`` quoted as Rust's ``{:?}`` quotes it (the whitespace this check lets through)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    for char, escape in (("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")):
        escaped = escaped.replace(char, escape)
    return f'"{escaped}"'


def _chunks(source: Source, progress: _Progress | None) -> Iterator[bytes]:
    """The (decompressed) bytes of a file in chunks; a truncated stream is an error.

    Decompressor objects rather than file wrappers: they expose ``eof``, so a stream that ends
    before its end marker is caught (zstandard's stream reader silently stops there).
    """
    done = 0
    if isinstance(source.span, ByteRange):
        yield from _span_chunks(source, source.span, progress)
        return
    try:
        with open(source.path, "rb") as raw:
            decoder = _decompressor(source.compression) if source.compression else None
            while chunk := raw.read(_CHUNK_BYTES):
                if decoder is not None and not done:
                    refused = _not_compressed(source, chunk)
                    if refused is not None:
                        raise refused
                done += len(chunk)
                if progress is not None:
                    progress(len(chunk))
                if decoder is None:
                    yield chunk
                    continue
                while chunk:
                    yield decoder.decompress(chunk)
                    chunk = decoder.unused_data if decoder.eof else b""
                    if chunk:  # a concatenated member or frame follows
                        decoder = _decompressor(source.compression)
            if decoder is not None and not decoder.eof and done:
                raise InputError(
                    f"{source.name}: truncated {source.compression} file (the compressed stream "
                    f"ends without its end marker after {done} bytes); re-download or "
                    "re-compress it"
                )
    except InputError:
        raise
    except (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError) as err:
        raise InputError(
            f"{source.name}: corrupt {source.compression or 'input'} file near byte {done} "
            f"({type(err).__name__}: {err}); re-download or re-compress it"
        ) from err
    except Exception as err:  # zstandard.ZstdError, without importing zstandard for plain files
        if type(err).__name__ != "ZstdError":
            raise
        raise InputError(
            f"{source.name}: corrupt zst file near byte {done} ({err}); re-download or "
            "re-compress it"
        ) from err


def _span_chunks(source: Source, span: ByteRange, progress: _Progress | None) -> Iterator[bytes]:
    """The bytes of ``span`` of an uncompressed file, in chunks."""
    if source.compression is not None:
        raise ConfigError(f"{source.name}: a compressed file is read whole, not by byte ranges")
    with open(source.path, "rb") as raw:
        raw.seek(span.start)
        left = span.end - span.start
        while left > 0 and (chunk := raw.read(min(_CHUNK_BYTES, left))):
            left -= len(chunk)
            if progress is not None:
                progress(len(chunk))
            yield chunk
    if left > 0:
        raise InputError(
            f"{source.name}: ends at byte {span.end - left}, before the planned range's end at "
            f"{span.end}; the file changed since the plan: plan again"
        )


_BOM = b"\xef\xbb\xbf"


def line_pieces(source: Source, progress: _Progress | None) -> Iterator[tuple[int, bytes]]:
    """(byte offset in the decompressed text, bytes): the text in pieces of whole lines.

    A piece is a chunk up to its last newline, so that it is decoded and split at C speed; only
    the file's last piece may lack its final newline. A line longer than a chunk is gathered in
    a list (joined once, not re-copied per chunk). A UTF-8 byte-order mark at the start of the
    text (Windows editors write one) is dropped: it is not part of the first document, and
    JSON parsers refuse it."""
    pending: list[bytes] = []  # the start of a line that began in earlier chunks
    offset = source.span.start if isinstance(source.span, ByteRange) else 0
    first = offset == 0  # only the text's start can hold a byte-order mark
    head = b""  # the text's first bytes, until they are enough to tell a mark
    for chunk in _chunks(source, progress):
        if not chunk:
            continue
        if first:
            head += chunk
            if len(head) < len(_BOM) and _BOM.startswith(head):
                continue
            first, chunk = False, head
            if chunk.startswith(_BOM):
                chunk, offset = chunk[len(_BOM) :], len(_BOM)
        cut = chunk.rfind(b"\n") + 1
        if cut == 0:
            pending.append(chunk)
            continue
        piece = b"".join([*pending, chunk[:cut]]) if pending else chunk[:cut]
        pending = [chunk[cut:]] if cut < len(chunk) else []
        yield offset, piece
        offset += len(piece)
    tail = b"".join(pending) if not first else head  # (a text shorter than a mark)
    if tail:
        yield offset, tail
