"""The Python reader of raw text that ``prepare`` ran before its reading moved to Rust (issue
26), kept as the oracle of ``data_io.formats.raw_reading``: the documents of a text or JSONL
source cut, decoded and parsed in Python (``str.split``, ``bytes.decode``, a regex for blank
lines), with the same errors; Parquet and ``datasets`` sources through ``raw_text``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from data_io.errors import InputError
from data_io.formats.raw_text import (
    ReadOptions,
    ReadStats,
    Source,
    empty_input_error,
    jsonl_row_text,
    line_pieces,
    whole_documents,
)

__all__ = ["read_documents"]

_Progress = Any


def read_documents(
    source: Source, options: ReadOptions, stats: ReadStats, progress: _Progress | None = None
) -> Iterator[str]:
    """The documents of ``source``, in order; a source without any document is an error."""
    before = stats.documents
    if source.kind == "txt":
        documents = _txt_documents(source, options, stats, progress)
    elif source.kind == "jsonl":
        documents = _jsonl_documents(source, options, stats, progress)
    else:
        documents = whole_documents(source, options, stats, progress)
    for text in documents:
        stats.documents += 1
        stats.text_chars += len(text)
        yield text
    if stats.documents == before:
        if not source.explicit:
            stats.empty_sources.append(source.name)
            return
        raise empty_input_error(source)


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
