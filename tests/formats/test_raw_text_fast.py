"""The oracle's chunked text and JSONL readers (tests/formats/raw_text_oracle.py, the Python
reader prepare ran before Rust read) against the plain line-by-line reader they replaced; the
error tests read with the Rust reader (``raw_reading.read_documents``).

The fast path decodes whole chunks and splits documents with one regex; the reference below is
the former reader (one line at a time). On tricky input (CRLF, lone CR, BOM, invalid UTF-8 in
the middle of a chunk and across a chunk boundary, blank-line runs across chunk boundaries,
whitespace-only lines, control characters, very long lines), read with chunks of a few bytes so
that every boundary falls everywhere, both must give the same documents, counters and errors.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from data_io.errors import InputError
from data_io.formats import raw_reading
from data_io.formats import raw_text as inputs
from data_io.formats.raw_reading import read_documents
from data_io.formats.raw_text import ReadOptions, ReadStats, Source, expand_inputs
from tests.formats import raw_text_oracle as oracle


# -- the reference: the former line-by-line reader ------------------------------------------------
def _plain_lines(source: Source) -> Iterator[tuple[int, int, bytes]]:
    pending, number, offset, first = b"", 0, 0, True
    for chunk in oracle._chunks(source, None):
        if not chunk:
            continue
        if first:  # a byte-order mark, even when it comes in several chunks
            pending += chunk
            if len(pending) < 3 and b"\xef\xbb\xbf".startswith(pending):
                continue
            first, chunk, pending = False, pending, b""
            if chunk.startswith(b"\xef\xbb\xbf"):
                chunk, offset = chunk[3:], 3
        parts = (pending + chunk).split(b"\n")
        pending = parts.pop()
        for line in parts:
            number += 1
            yield number, offset, line
            offset += len(line) + 1
    if pending:
        yield number + 1, offset, pending


def _plain_txt(source: Source, options: ReadOptions, stats: ReadStats) -> Iterator[str]:
    block: list[str] = []
    for number, offset, raw in _plain_lines(source):
        where = f"{source.name}: line {number}"
        line = oracle._decode(raw, where, offset, source, options, stats)
        if line.endswith("\r"):
            line = line[:-1]
        if options.doc_per_line:
            if line.strip():
                yield line
        elif line.strip():
            block.append(line)
        elif block:
            yield "\n".join(block)
            block = []
    if block:
        yield "\n".join(block)


def _plain_jsonl(source: Source, options: ReadOptions, stats: ReadStats) -> Iterator[str]:
    for number, offset, raw in _plain_lines(source):
        where = f"{source.name}: line {number}"
        line = oracle._decode(raw, where, offset, source, options, stats)
        if not line.strip():
            continue
        text = inputs._json_text(line, options.text_field, where)  # json alone, no orjson
        yield text if text.isascii() else inputs._valid_unicode(text, where, options, stats)


def _outcome(read, *args) -> tuple[list[str], ReadStats | None, str | None]:  # type: ignore[no-untyped-def]
    """Documents, counters and error message of one reader (all the parts a caller sees).

    On an error only its message counts: the run stops there (its documents and counters are
    never used), and the fast reader decodes a whole chunk before yielding its documents."""
    stats = ReadStats()
    try:
        docs = list(read(*args, stats))
    except InputError as err:
        return [], None, str(err)
    return docs, stats, None


def _compare(path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch, **options) -> list[str]:
    monkeypatch.setattr(oracle, "_CHUNK_BYTES", chunk)
    read = ReadOptions(**options)
    (source,), _ = expand_inputs([path], read)
    plain = _plain_jsonl if source.kind == "jsonl" else _plain_txt
    fast = oracle._jsonl_documents if source.kind == "jsonl" else oracle._txt_documents
    expected = _outcome(plain, source, read)
    got = _outcome(lambda s, o, st: fast(s, o, st, None), source, read)
    assert got == expected, f"chunk {chunk}"
    return got[0]


# -- tricky text -------------------------------------------------------------------------------------
_PIECES = [
    b"word",
    b"two words",
    b" ",
    b"\t",
    b"\r",
    b"\r\n",
    b"\n",
    b"\n\n",
    b"\n  \n",
    b"\n\t\r\n",
    b"\n\x0c\n",  # a form feed: whitespace to str.strip, so a blank line
    b"\xc2\x85",  # NEXT LINE: whitespace, not a line break here
    b"\xe2\x80\xa8",  # LINE SEPARATOR: the same
    b"caf\xc3\xa9",
    b"e\xcc\x81",  # not NFC
    b"\x00\x07\x1b",
    b"\xe2\x82\xac",  # a three-byte character (split by small chunks)
    b"\xf0\x9f\x98\x80",  # a four-byte character
    b"\xff",  # invalid
    b"\xc3(",  # invalid: a truncated sequence
    b"\xed\xa0\x80",  # invalid: an encoded surrogate
]


def _tricky(seed: int, valid: bool) -> bytes:
    rng = random.Random(seed)
    pieces = _PIECES[:-3] if valid else _PIECES
    data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 120)))
    if rng.random() < 0.3:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.2:
        data += b"x" * rng.randint(50, 300)  # a line longer than many chunks
    return data


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("doc_per_line", [False, True])
def test_txt_matches_the_line_by_line_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, doc_per_line: bool
):
    path = tmp_path / "a.txt"
    path.write_bytes(_tricky(seed, valid=seed % 2 == 0))
    for chunk in (1, 2, 3, 5, 16, 1 << 20):
        for policy in ("replace", "fail"):
            _compare(path, chunk, monkeypatch, doc_per_line=doc_per_line, invalid_utf8=policy)


# Rows where orjson and json differ (or fail): json's result and message must decide.
_ODD_ROWS = [
    b"{not json",
    b"[1, 2]",
    b'"just a string"',
    b'{"other": 1}',
    b'{"text": 5}',
    b'{"text": 123456789012345678901234567890}',  # json: an int; orjson: a float
    b'{"text": null}',
    b'{"text": "ok", "n": NaN}',  # json only
    b'{"text": "ok", "n": 1e999}',  # json only
    b'{"text": "first", "text": "last"}',
    b'{"text": "a\\u0000b \\ud83d\\ude00 pair"}',
    b'{"text": "ok"} trailing',
    b"[" * 2000 + b"]" * 2000,  # deeper than orjson parses
]


@pytest.mark.parametrize("seed", range(20))
def test_jsonl_matches_the_line_by_line_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
):
    rng = random.Random(seed)
    lines = []
    for _ in range(rng.randint(1, 12)):
        text = _tricky(rng.randint(0, 10**6), valid=True).decode("utf-8")
        kind = rng.random()
        if kind < 0.6:
            lines.append(json.dumps({"text": text}, ensure_ascii=rng.random() < 0.5).encode())
        elif kind < 0.7:
            lines.append(b'{"text": "lone \\ud800 surrogate"}')
        elif kind < 0.8:
            lines.append(rng.choice([b"", b"  ", b"\r", b"\t \r"]))  # blank rows
        elif kind < 0.9:
            lines.append(b'{"text": "bad \xff byte"}')
        else:
            lines.append(rng.choice(_ODD_ROWS))
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\r\n".join(lines) if seed % 3 == 0 else b"\n".join(lines) + b"\n")
    _compare(path, 1 << 20, monkeypatch)  # (odd rows are rare: each is also checked below)
    for chunk in (1, 4, 7, 1 << 20):
        for policy in ("replace", "fail"):
            _compare(path, chunk, monkeypatch, invalid_utf8=policy)


def test_blank_line_runs_across_chunk_boundaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "a.txt"
    path.write_bytes(b"one\r\ntwo\n \n\t\n\nthree\n\n\n\nfour\r\r\n  five  \n")
    for chunk in range(1, 12):
        docs = _compare(path, chunk, monkeypatch)
        assert docs == ["one\ntwo", "three", "four\r\n  five  "]


def test_invalid_utf8_across_a_chunk_boundary_names_its_line_and_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = tmp_path / "a.txt"
    # A valid euro sign split by the boundaries, then a truncated one on line 3 at offset 10.
    path.write_bytes(b"a \xe2\x82\xac\n\nbb \xe2\x82\xff\ncc\n")
    for chunk in (1, 3, 4, 5, 14, 1 << 20):
        docs = _compare(path, chunk, monkeypatch)
        assert docs == ["a \u20ac", "bb \ufffd\ufffd\ncc"]
    monkeypatch.setattr(raw_reading, "_READ_BYTES", 4)  # Rust's reads cut the boundaries too
    with pytest.raises(InputError, match=r"a\.txt: line 3: invalid UTF-8 at byte offset 10 "):
        list(read_documents(expand_inputs([path], ReadOptions())[0][0], _fail(), ReadStats()))


def _fail() -> ReadOptions:
    return ReadOptions(invalid_utf8="fail")


def test_a_byte_order_mark_only_at_the_start_and_offsets_count_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbfone\n\xef\xbb\xbftwo \xff\n")
    for chunk in (3, 4, 1 << 20):  # (a first chunk shorter than the mark keeps it, as before)
        assert _compare(path, chunk, monkeypatch) == ["one\n\ufefftwo \ufffd"]
    with pytest.raises(InputError, match=r"line 2: invalid UTF-8 at byte offset 14 "):
        list(read_documents(expand_inputs([path], _fail())[0][0], _fail(), ReadStats()))


def test_a_line_longer_than_many_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "a.txt"
    long = "é" * 5000
    path.write_text(f"{long}\n\nshort\n{long}\r", encoding="utf-8")
    assert _compare(path, 7, monkeypatch) == [long, f"short\n{long}"]


def test_a_final_lone_cr_and_cr_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "a.txt"
    path.write_bytes(b"a\r\r\nb\r\r")
    for chunk in (1, 2, 1 << 20):
        assert _compare(path, chunk, monkeypatch) == ["a\r\nb\r"]


def test_a_walked_folder_names_real_files_and_resolves_only_links(tmp_path: Path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "t.txt").write_text("target")
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("real")
    (folder / "link.txt").symlink_to(Path("..") / "elsewhere" / "t.txt")  # relative link
    (folder / "linked_dir").symlink_to(tmp_path / "elsewhere")  # not entered by the walk
    sources, _ = expand_inputs([tmp_path / "." / "in"], ReadOptions())
    assert [(s.name, s.size) for s in sources] == [
        (str((tmp_path / "elsewhere" / "t.txt").resolve()), 6),
        (str((folder / "sub" / "a.txt").resolve()), 4),
    ]


@pytest.mark.parametrize("row", _ODD_ROWS)
def test_each_odd_jsonl_row_as_json_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, row: bytes
):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "before"}\n' + row + b"\n")
    for policy in ("replace", "fail"):
        _compare(path, 1 << 20, monkeypatch, invalid_utf8=policy)


def test_deeply_nested_json_is_an_input_error_naming_the_line(tmp_path: Path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"text": "fine"}\n' + b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")
    (source,), _ = expand_inputs([path], ReadOptions())
    with pytest.raises(InputError, match=r"a\.jsonl: line 2: JSON nested too deeply"):
        list(read_documents(source, ReadOptions(), ReadStats()))
