"""Where the raw text comes from: input arguments to a list of sources, and their text.

A source is a local file (``.txt``, ``.jsonl``, ``.parquet``; text and JSONL optionally
compressed ``.gz .zst .bz2 .xz``) or a ``datasets`` source (a Hub id, an ``hf download``
folder, a ``save_to_disk`` folder; streamed). Folders are walked recursively in sorted order;
their hidden entries and files of other types are skipped and listed. Documents are produced in
batches, so memory is bounded by a batch (and the longest document), never by a file.

Every error names the file and the line (text, JSONL) or row (Parquet, datasets) at fault.
"""

from __future__ import annotations

import base64
import json
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson

from data_io.errors import ConfigError, InputError
from data_io.formats.text_sources import resolve_text_source
from data_io.util.arrow_strings import is_text_type
from data_io.util.json_kinds import json_kind

__all__ = [
    "INVALID_UTF8_POLICIES",
    "ByteRange",
    "GzipPoint",
    "PartsRange",
    "ReadOptions",
    "ReadStats",
    "RowGroups",
    "Source",
    "TextRange",
    "datasets_batches",
    "datasets_documents",
    "empty_input_error",
    "expand_inputs",
    "jsonl_row_text",
    "parquet_batch_texts",
    "parquet_batches",
]

INVALID_UTF8_POLICIES = ("replace", "fail")
_FORMATS = {".txt": "txt", ".text": "txt", ".jsonl": "jsonl", ".ndjson": "jsonl"}
_PARQUET = ".parquet"
_COMPRESSIONS = {".gz": "gz", ".zst": "zst", ".bz2": "bz2", ".xz": "xz"}
# A folder that `datasets` must read (its own layout): save_to_disk markers, or the bookkeeping
# folder `hf download --local-dir` leaves behind.
_DATASETS_MARKERS = ("state.json", "dataset_dict.json", ".cache/huggingface")
_PARQUET_BATCH_ROWS = 2048
_SURROGATE = re.compile("[\ud800-\udfff]")
_SUPPORTED = ".txt, .text, .jsonl, .ndjson (each optionally .gz, .zst, .bz2, .xz) and .parquet"


@dataclass(frozen=True)
class ByteRange:
    """Part of an uncompressed text or JSONL file that starts and ends at document boundaries
    (``formats.ranges``): bytes ``start`` to ``end``, the first line being line ``first_line``."""

    start: int
    end: int
    first_line: int


@dataclass(frozen=True)
class TextRange:
    """Part of a compressed text or JSONL file, which cannot be entered in the middle
    (``formats.ranges``): its text from the cut for target offset ``start`` to the cut for
    ``end`` (``rust/prepare/cuts.rs``: the next document boundary), ``total`` being the plan's
    estimate of the text's length, at which the last range ends and reads on to the text's
    end. Reading it decompresses the text before it, or, in a gzip file, only the text from
    its entry ``point`` on (``GzipPoint``; ``start`` lies one byte past the point's text)."""

    start: int
    end: int
    total: int
    point: GzipPoint | None = None


@dataclass(frozen=True)
class GzipPoint:
    """Where a reader can enter a gzip file (``rust/reader/frames/gzip_points``): the deflate
    block starting at file bit ``bit``, with ``text`` bytes and ``newlines`` newlines of text
    before it; its member's text starts at ``member_text``, whose CRC-32 up to the point is
    ``crc``; ``window``: the member's last 32 KiB of text before it."""

    bit: int
    text: int
    newlines: int
    member_text: int
    crc: int
    window: bytes

    def as_tuple(self) -> tuple[int, int, int, int, int, bytes]:
        """As ``_core`` takes it."""
        return (self.bit, self.text, self.newlines, self.member_text, self.crc, self.window)

    def record(self) -> dict[str, Any]:
        """For a plan's JSON: the window deflated, in base64."""
        fields = {name: getattr(self, name) for name in _POINT_NUMBERS}
        return {**fields, "window": base64.b64encode(zlib.compress(self.window, 9)).decode()}

    @classmethod
    def from_record(cls, record: Any) -> GzipPoint:
        """The point ``record`` holds (``record()``'s); ``ConfigError`` when it is damaged."""
        try:
            window = zlib.decompress(base64.b64decode(record["window"], validate=True))
            numbers = [int(record[name]) for name in _POINT_NUMBERS]
        except (KeyError, TypeError, ValueError, zlib.error) as err:  # binascii.Error: ValueError
            raise ConfigError(
                f"a gzip entry point in the plan is damaged ({type(err).__name__}: {err}); "
                "plan again"
            ) from None
        _, text, _, member_text, crc = numbers
        if min(numbers) < 0 or member_text > text or crc >= 1 << 32 or len(window) > 32 << 10:
            raise ConfigError(
                f"a gzip entry point in the plan is out of range ({numbers}); plan again"
            )
        return cls(*numbers, window=window)


_POINT_NUMBERS = ("bit", "text", "newlines", "member_text", "crc")


@dataclass(frozen=True)
class PartsRange:
    """Part of a compressed text or JSONL file made of parts that decode on their own (zstd
    frames, BGZF members, xz blocks; ``formats.ranges``): its text from the first document
    boundary in the part at file offset ``start`` to the first one in the part at ``end``
    (``end == size``, the file's size: to the text's end). Reading it decompresses its own
    parts and a little of the next."""

    start: int
    end: int
    size: int


@dataclass(frozen=True)
class RowGroups:
    """Part of a Parquet file (``formats.ranges``): its row groups ``start`` to ``end`` of
    ``total``, the first one's first row being row ``first_row``."""

    start: int
    end: int
    first_row: int
    total: int


@dataclass(frozen=True)
class Source:
    """One input: a local file, or a dataset read through ``datasets``."""

    name: str  # the path (absolute) or the Hub id: the source's key in the metadata
    kind: str  # "txt" | "jsonl" | "parquet" | "datasets"
    compression: str | None = None
    size: int = 0  # bytes on disk (0 for a Hub dataset)
    # Named on the command line (an empty one is an error) or found by walking a folder (an
    # empty one is skipped and counted: document trees hold empty files).
    explicit: bool = True
    # Only this part of the file (a scale unit's share of one large file); None: all of it.
    span: ByteRange | TextRange | PartsRange | RowGroups | None = None

    @property
    def path(self) -> Path:
        return Path(self.name)


@dataclass(frozen=True)
class ReadOptions:
    text_field: str = "text"
    doc_per_line: bool = False
    invalid_utf8: str = "replace"
    split: str = "train"  # of a datasets source
    hf_config: str | None = None

    def identity(self) -> dict[str, Any]:
        """What changes the documents of any source read (so must match between incremental
        runs): how a text is cut into documents, what becomes of bytes that are not UTF-8."""
        return {"doc_per_line": self.doc_per_line, "invalid_utf8": self.invalid_utf8}

    def source_identity(self, kind: str) -> dict[str, Any]:
        """What chooses the text of one source of ``kind`` (recorded with that input: a later
        run may add sources whose text lies in another field, or another split)."""
        chosen: dict[str, Any] = {}
        if kind in ("jsonl", "parquet", "datasets"):
            chosen["text_field"] = self.text_field
        if kind == "datasets":
            chosen.update(split=self.split, hf_config=self.hf_config)
        return chosen


@dataclass
class ReadStats:
    """Counters of the reading step, shared by every source of a run."""

    documents: int = 0
    bytes_read: int = 0  # on disk (compressed bytes for a compressed file)
    text_chars: int = 0  # of the decoded text
    invalid_utf8_lines: int = 0  # lines or rows where invalid bytes were replaced by U+FFFD
    empty_sources: list[str] = field(default_factory=list)  # found in folders, no document


# -- input arguments to sources -------------------------------------------------------------------
def expand_inputs(
    inputs: list[str | os.PathLike[str]], options: ReadOptions
) -> tuple[list[Source], list[str]]:
    """The sources named by ``inputs`` (in order; folders walked sorted) and the skipped files."""
    if not inputs:
        raise ConfigError("no input given; pass files, folders or Hub dataset ids")
    sources: list[Source] = []
    skipped: list[str] = []
    for item in inputs:
        text = os.fspath(item)
        path = Path(text).expanduser()
        if path.is_file():
            sources.append(_file_source(path, explicit=True))  # type: ignore[arg-type]
        elif path.is_dir():
            sources.extend(_folder_sources(path.resolve(), skipped, options))
        else:
            sources.append(_datasets_source(text, options))
    return _each_once(sources, skipped), skipped


# The read options a prepared folder recorded for itself, before each input recorded its own.
FOLDER_READ_KEYS = ("text_field", "split", "hf_config")


def recorded_read(entry: dict[str, Any], legacy: dict[str, Any]) -> dict[str, Any] | None:
    """What chose the text of a recorded input: its own ``read``, or, for an input recorded
    before inputs kept theirs, the values of the folder's options ``legacy`` that apply to its
    kind. None: nothing chooses the text of a text file."""
    read = entry.get("read")
    if isinstance(read, dict) and read:
        return read
    folder = ReadOptions(
        text_field=legacy.get("text_field", "text"),
        split=legacy.get("split", "train"),
        hf_config=legacy.get("hf_config"),
    )
    return folder.source_identity(str(entry.get("kind", ""))) or None


def check_datasets_options_used(
    sources: list[Source],
    options: ReadOptions,
    *,
    held: frozenset[tuple[str, str | None]] = frozenset(),
) -> None:
    """A split or configuration other than the default chooses rows of a ``datasets`` source
    only: refused when no input is one, where it would be ignored (a folder of a dataset's
    files without the ``datasets`` markers is read as plain files, every split's together).
    ``held``: the (split, configuration) of the datasets inputs the output folder holds; the
    same again is no mistake (a script that passes the same options to every run)."""
    given = [
        f"--{flag} {value}"
        for flag, value, default in (
            ("split", options.split, "train"),
            ("hf-config", options.hf_config, None),
        )
        if value != default
    ]
    chosen = (options.split, options.hf_config)
    if not given or chosen in held or any(source.kind == "datasets" for source in sources):
        return
    raise ConfigError(
        f"{' and '.join(given)} choose{'s' if len(given) == 1 else ''} from a datasets source (a "
        "folder saved by datasets or downloaded from the Hub, with its .cache/huggingface or "
        "state.json, or a Hub id), and no input is one: every input is read as plain files, "
        "whatever the split. Leave the option out, or pass the files of the split you want"
    )


def _each_once(sources: list[Source], skipped: list[str]) -> list[Source]:
    """Each file once. Named twice on the command line is a mistake; reached again through a
    folder (a link, or a file also named alone) it is read at its first place and listed."""
    first: dict[str, Source] = {}
    kept = []
    for source in sources:
        earlier = first.get(source.name)
        if earlier is None:
            first[source.name] = source
            kept.append(source)
        elif earlier.explicit and source.explicit:
            raise ConfigError(
                f"input {source.name} is given twice; pass each input once, or its documents "
                "would all be duplicates"
            )
        else:
            skipped.append(f"{source.name} (reached a second time, through a folder or a link)")
    return kept


def _file_source(path: Path, *, explicit: bool) -> Source | None:
    """The source of a local file, or None for a file of another type inside a folder."""
    suffixes = [s.lower() for s in path.suffixes]
    compression = _COMPRESSIONS.get(suffixes[-1]) if suffixes else None
    if compression:
        suffixes.pop()
    last = suffixes[-1] if suffixes else ""
    kind = _FORMATS.get(last) or ("parquet" if last == _PARQUET else None)
    if kind == "parquet" and compression:
        kind = None  # Parquet compresses inside the file; a compressed Parquet is not readable
    if kind is None:
        if not explicit:
            return None
        raise InputError(
            f"{path}: cannot tell the format from the extension; inputs are {_SUPPORTED}, "
            "folders of them, or Hub dataset ids"
        )
    # A file found by walking a resolved folder is already its resolved path unless it is a
    # link (the walk does not enter linked folders); resolving costs a syscall per component.
    resolved = path if not explicit and not path.is_symlink() else path.resolve()
    return Source(str(resolved), kind, compression, resolved.stat().st_size, explicit)


def _folder_sources(folder: Path, skipped: list[str], options: ReadOptions) -> list[Source]:
    if any((folder / marker).exists() for marker in _DATASETS_MARKERS):
        return [_datasets_source(str(folder), options)]
    found: list[Source] = []
    before = len(skipped)
    for path in _walk(folder, skipped):
        if not path.is_file():  # listed, so that nothing is left out without a word
            why = "a broken link" if path.is_symlink() else "not a regular file"
            skipped.append(f"{path} ({why})")
            continue
        source = _file_source(path, explicit=False)
        if source is None:
            skipped.append(f"{path} (not a type prepare reads)")
        else:
            found.append(source)
    if not found:
        left_out = skipped[before:]
        listed = "; ".join(left_out[:5]) + (
            f"; and {len(left_out) - 5} more" if len(left_out) > 5 else ""
        )
        raise InputError(
            f"{folder}: the folder holds no input files ({_SUPPORTED}); pass a folder with text"
            + (f" (left out: {listed})" if left_out else " (it is empty)")
        )
    return found


def _walk(folder: Path, skipped: list[str]) -> list[Path]:
    """Every entry under ``folder`` that is not a folder, sorted by path. A linked folder is
    walked where it really is (so that a file reached twice is known by its real path), each
    folder once; a hidden file or folder (its name starts with ".") is left out. What is left
    out is listed in ``skipped`` with its reason."""
    entries: list[Path] = []
    walked: set[tuple[int, int]] = set()

    def visit(directory: Path, key: tuple[int, int]) -> None:
        walked.add(key)
        try:
            listed = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as err:
            skipped.append(f"{directory} (cannot be listed: {err.strerror or err})")
            return
        for entry in listed:
            path = Path(entry.path)
            is_dir = entry.is_dir()  # through a link too
            if entry.name.startswith("."):
                skipped.append(f"{path} (hidden {'folder' if is_dir else 'file'}, not read)")
            elif not is_dir:
                entries.append(path)
            else:
                real = path.resolve() if entry.is_symlink() else path
                status = real.stat()
                key = (status.st_dev, status.st_ino)
                if key in walked:
                    skipped.append(f"{path} (a folder reached again through a link, read once)")
                else:
                    visit(real, key)

    root = folder.stat()
    visit(folder, (root.st_dev, root.st_ino))
    return sorted(entries)


def _datasets_source(name: str, options: ReadOptions) -> Source:
    """A Hub id or a datasets folder, checked by the load stage's resolver (no rows read)."""
    resolved = resolve_text_source(name, options.split, options.hf_config)
    resolved.check_reachable()  # before the tokenizer is loaded and any work is done
    return Source(resolved.name, "datasets", None, sum(p.stat().st_size for p in resolved.files))


# -- sources to documents ---------------------------------------------------------------------
class _Progress(Protocol):
    def __call__(self, raw_bytes: int) -> None: ...


def empty_input_error(source: Source) -> InputError:
    """The error of a source named on the command line that holds no document."""
    return InputError(
        f"{source.name}: empty input (no documents); remove it or pass a source with text"
    )


def jsonl_row_text(
    line: str, field: str, where: str, options: ReadOptions, stats: ReadStats
) -> str:
    """The text of one JSONL row. orjson parses (several times faster); a row it refuses or
    that is not an object with a string ``field`` is parsed again by ``json``, whose result
    and messages decide (it accepts what orjson does not: lone surrogate escapes, NaN)."""
    try:
        row = orjson.loads(line)
        text = row.get(field) if type(row) is dict else None
    except orjson.JSONDecodeError:
        text = None
    # A key given twice: both parsers keep the last, but which one is the text is the writer's
    # mistake, not ours to pick (tokenize's rows reader refuses it too). json, which counts them,
    # reads a line naming the field twice or holding an escape that could spell it.
    if type(text) is not str or line.count(f'"{field}"') > 1 or "\\" in line:
        text = _json_text(line, field, where)
    return text if text.isascii() else _valid_unicode(text, where, options, stats)


def _json_text(line: str, field: str, where: str) -> str:
    outermost: list[list[tuple[str, Any]]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        outermost[:] = [pairs]  # objects are built innermost first: the last is the row
        return dict(pairs)

    try:
        row = json.loads(line, object_pairs_hook=keep)
    except json.JSONDecodeError as err:
        raise InputError(
            f"{where}: not valid JSON at column {err.colno} ({err.msg}); each line must hold "
            "one JSON object"
        ) from err
    except RecursionError as err:  # json recurses per level of nesting
        raise InputError(
            f"{where}: JSON nested too deeply to read; each line must hold one JSON object "
            "with the text in a top-level field"
        ) from err
    except ValueError as err:  # an integer longer than Python converts (sys.int_info)
        raise InputError(
            f"{where}: a number too long to read ({err}); fix the row or remove the number"
        ) from err
    times = sum(key == field for key, _ in outermost[0]) if type(row) is dict else 1
    if times > 1:
        raise InputError(
            f"{where}: the field {field!r} is given {times} times in the row; which is the "
            "text is not clear: keep one"
        )
    return _field_text(row, field, where)


def _valid_unicode(text: str, where: str, options: ReadOptions, stats: ReadStats) -> str:
    """``text`` without lone surrogates (JSON "\\ud800" escapes): they cannot be encoded."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError as err:
        if options.invalid_utf8 == "fail":
            raise InputError(
                f"{where}: the text holds a lone surrogate {text[err.start]!r} at character "
                f"{err.start} (an invalid \\u escape); fix the row, or pass --invalid-utf8 "
                "replace to replace it with U+FFFD and count it"
            ) from err
        stats.invalid_utf8_lines += 1
        return _SURROGATE.sub("\ufffd", text)


def _field_text(row: Any, field: str, where: str) -> str:
    """The text of ``row[field]``; an error naming the row when it is missing or not a string."""
    if not isinstance(row, dict):
        raise InputError(
            f"{where}: expected a JSON object with a {field!r} field, got {type(row).__name__}"
        )
    if field not in row:
        fields = ", ".join(map(str, row)) or "none"
        raise InputError(
            f"{where}: no field {field!r} (the row has {fields}); pass --text-field NAME for "
            "the field holding the text, or fix the row"
        )
    value = row[field]
    if not isinstance(value, str):
        what = json_kind(value)
        raise InputError(
            f"{where}: field {field!r} is {what}, not a string; pass --text-field NAME for the "
            "field holding the text, or fix the row"
        )
    return value


def parquet_batches(
    source: Source, options: ReadOptions, progress: _Progress | None
) -> Iterator[tuple[int, Any]]:
    """(number of the batch's first row, its text column: a pyarrow string array) for each
    batch of the Parquet source's rows (or its planned row groups), the file and its column
    checked first; ``progress`` gets the file's bytes in proportion to the rows read."""
    import pyarrow as pa  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data

    field = options.text_field
    try:
        parquet = pq.ParquetFile(source.path)
    except (pa.ArrowException, OSError) as err:
        raise InputError(
            f"{source.name}: not a readable Parquet file ({err}); re-write or re-download it"
        ) from err
    schema = parquet.schema_arrow
    if field not in schema.names:
        raise InputError(
            f"{source.name}: no column {field!r} (it has {', '.join(schema.names) or 'none'}); "
            "pass --text-field NAME for the column holding the text"
        )
    kind = schema.field(field).type
    if not is_text_type(kind):
        raise InputError(
            f"{source.name}: column {field!r} has type {kind}, not a string; pass --text-field "
            "NAME for the column holding the text"
        )
    span = source.span if isinstance(source.span, RowGroups) else None
    groups = None if span is None else range(span.start, span.end)
    if span is not None and parquet.metadata.num_row_groups != span.total:
        raise InputError(
            f"{source.name}: has {parquet.metadata.num_row_groups} row groups, not the "
            f"{span.total} of the plan; the file changed since the plan: plan again"
        )
    row = first_row = span.first_row if span is not None else 0
    rows = parquet.metadata.num_rows
    if groups is not None:
        rows = sum(parquet.metadata.row_group(g).num_rows for g in groups)
    total_rows = max(rows, 1)
    size = source.size * rows // max(parquet.metadata.num_rows, 1)  # this part's share
    reported = 0  # bytes of the file counted so far: its size in proportion to the rows read
    try:
        for batch in parquet.iter_batches(
            batch_size=_PARQUET_BATCH_ROWS, columns=[field], row_groups=groups
        ):
            if progress is not None:
                done = size * min(row - first_row + batch.num_rows, total_rows) // total_rows
                progress(done - reported)
                reported = done
            yield row, batch.column(0)
            row += batch.num_rows
    # A damaged page can come as pyarrow's OSError ("Invalid BYTE_ARRAY value"), not only as
    # an ArrowException: both name the file and the rows.
    except (pa.ArrowException, OSError) as err:
        raise _unreadable_rows(source, row, err) from err
    if progress is not None and size > reported:
        progress(size - reported)


def parquet_batch_texts(
    source: Source, options: ReadOptions, stats: ReadStats, row: int, column: Any
) -> list[str]:
    """The texts of one batch of ``parquet_batches`` (its first row ``row``) as Python strings;
    a null or an unreadable value is an error naming the row. Parquet writers do not all check
    their strings: invalid UTF-8 is replaced with U+FFFD and counted, or with
    ``--invalid-utf8 fail`` an error naming the row and byte, as in text files."""
    import pyarrow as pa  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data

    try:
        values = column.to_pylist()
    except UnicodeDecodeError:
        values = _decoded(source, options, stats, row, column.cast(pa.binary()).to_pylist())
    except pa.ArrowException as err:
        raise _unreadable_rows(source, row, err) from err
    for k, value in enumerate(values):
        if value is None:
            raise InputError(
                f"{source.name}: row {row + k}: column {options.text_field!r} is null, not a "
                "string; drop the row or fill it"
            )
    return values


def _decoded(
    source: Source, options: ReadOptions, stats: ReadStats, row: int, raw: list[bytes | None]
) -> list[str | None]:
    """``raw`` values decoded one by one under the invalid-UTF-8 policy."""
    values: list[str | None] = []
    for k, value in enumerate(raw):
        try:
            values.append(None if value is None else value.decode("utf-8"))
        except UnicodeDecodeError as err:
            if options.invalid_utf8 == "fail":
                raise InputError(
                    f"{source.name}: row {row + k}: column {options.text_field!r} holds invalid "
                    f"UTF-8 at byte {err.start} of its text ({err.reason}); fix the row, or pass "
                    "--invalid-utf8 replace to replace bad bytes with U+FFFD and count them"
                ) from None
            stats.invalid_utf8_lines += 1
            values.append(value.decode("utf-8", errors="replace"))
    return values


def _unreadable_rows(source: Source, row: int, err: Exception) -> InputError:
    return InputError(
        f"{source.name}: cannot read rows after row {row} ({err}); re-write or re-download it"
    )


def datasets_documents(source: Source, options: ReadOptions) -> Iterator[str]:
    """The documents of a ``datasets`` source, one per row (``options.text_field`` of each),
    streamed as Python dicts; not counted here: ``prepare`` counts them in Rust."""
    resolved = resolve_text_source(source.name, options.split, options.hf_config)
    yield from _row_texts(resolved, resolved.load(streaming=True), options.text_field)


def _row_texts(resolved: Any, rows: Any, field: str) -> Iterator[str]:
    for number, row in enumerate(rows):
        yield _field_text(row, field, f"{resolved.label}: row {number}")


def datasets_batches(source: Source, options: ReadOptions) -> Iterator[tuple[int, Any]]:
    """(number of the batch's first row, its texts) for each batch of a ``datasets`` source,
    streamed as Arrow tables. Where the batch's text column is a string column (a saved
    dataset, Parquet, Arrow, and JSON rows, whose column types pyarrow infers as it reads
    them, even where ``datasets`` names no features): that column, as a pyarrow string array,
    with no Python object per row. Else (a column of another type, or none): the batch's
    rows as dicts, each row's field checked. Either way a missing, null or non-string value is
    an error naming the row, as ``datasets_documents`` says it."""
    resolved = resolve_text_source(source.name, options.split, options.hf_config)
    rows = resolved.load(streaming=True)
    field = options.text_field
    row = 0
    for table in rows.with_format("arrow").iter(batch_size=_PARQUET_BATCH_ROWS):
        kind = table.schema.field(field).type if field in table.column_names else None
        if kind is not None and is_text_type(kind):
            column = table.column(field).combine_chunks()
            if column.null_count:  # the first null, named as the dict rows name it
                for k, value in enumerate(column.to_pylist()):
                    _field_text({field: value}, field, f"{resolved.label}: row {row + k}")
            yield row, column
        else:
            yield row, _checked_rows(table, field, kind, resolved.label, row)
        row += table.num_rows


def _checked_rows(table: Any, field: str, kind: Any, label: str, first: int) -> list[str]:
    """The texts of a batch whose text column is not a string column, each row checked. A
    column ``datasets`` types as JSON (values of mixed types) holds each value as JSON text:
    decoded first, as the rows' dicts would hold it, so that a number is named as one."""
    json_text = getattr(kind, "extension_name", "") == "arrow.json"
    texts = []
    for k, values in enumerate(table.to_pylist()):
        if json_text and values.get(field) is not None:
            values[field] = json.loads(values[field])
        texts.append(_field_text(values, field, f"{label}: row {first + k}"))
    return texts
