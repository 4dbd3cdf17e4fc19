"""Where a cleaner's input comes from, read as a stream of :class:`Record` objects.

Two kinds of source cover every dataset of cleaners.md:

- :class:`HubDataset`: a Hugging Face Hub dataset read through ``datasets`` (streaming by
  default), or a local copy of it, i.e. the folder that ``hf download REPO --repo-type dataset``
  produces (looked for under ``raw_data/hub/<repo>`` unless ``--source`` names one).
- :class:`LocalFiles`: raw files under ``raw_data/`` (JSON, JSON Lines, CSV, text, Parquet, or
  a ``.tar.gz`` read member by member without extracting it). Listings are sorted so that the
  output never depends on the filesystem's order.

A *reader* turns one file into records; the readers below cover the formats of cleaners.md §6.1
and a cleaner may pass its own (any ``(path, rel) -> Iterator[Record]`` function).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import lzma
import os
import shutil
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from data_io.cleaning.hub import (
    closed_files,
    damage_of,
    failed_file_log,
    hub_unreachable,
    local_path,
    offline_by_environment,
    parquet_row_count,
    placeholder_of,
    wait_for_abandoned_reads,
)
from data_io.errors import DataIoError, InputError
from data_io.util.arrow_strings import is_text_type
from data_io.util.console import quiet_newly_imported
from data_io.util.stale import remove_dead_siblings, temporary_prefix

#: Local copies of Hub datasets are looked for here (``raw_data/hub/<owner>/<name>``).
HUB_COPIES_ROOT = Path("raw_data") / "hub"

# Rows per Arrow table taken from ``datasets`` when a cleaner works record by record: big
# enough to amortise the conversion, small enough that memory stays flat.
_HUB_READ_ROWS = 1024


# Not frozen: a frozen dataclass's __init__ is slow, and there is one Record per source row.
@dataclass(slots=True)
class Record:
    """One unit of input: a row (a ``dict``), a tar member, or an Arrow batch of ``rows`` rows.

    ``file`` is what the record came from relative to the source root (``"math.json"``,
    ``"main/train"`` for a Hub config/split, a tar member's name); ``index`` its 0-based
    position there (the first row, for a batch). Cleaners read fields with ``record["name"]``.
    """

    data: Any
    file: str
    index: int
    origin: str
    rows: int = 1
    unit: str = "row"

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def where(self) -> str:
        """Location for messages: file and row, e.g. ``raw_data/ARB/math.json item 3``."""
        if self.rows != 1:
            return f"{self.origin} {self.unit}s {self.index}-{self.index + self.rows - 1}"
        return f"{self.origin} {self.unit} {self.index}"


Reader = Callable[[Path, str], Iterator[Record]]


# ---------------------------------------------------------------------------------------------
# Readers: one file -> records.


def _load_json(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid UTF-8 JSON ({exc}); re-download the file") from exc


def read_json_array(path: Path, rel: str) -> Iterator[Record]:
    """Each item of a file holding one JSON array (loaded whole: such files are small)."""
    items = _load_json(path)
    if not isinstance(items, list):
        raise InputError(f"{path}: expected a JSON array, found {type(items).__name__}")
    for index, item in enumerate(items):
        yield Record(item, rel, index, str(path), unit="item")


def read_json_object(path: Path, rel: str) -> Iterator[Record]:
    """The single JSON object a file holds, as one record."""
    item = _load_json(path)
    if not isinstance(item, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(item).__name__}")
    yield Record(item, rel, 0, str(path), unit="object")


def read_jsonl(path: Path, rel: str) -> Iterator[Record]:
    """Each line of a JSON Lines file (blank lines are an error: they hide truncation)."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                item = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(f"{path} line {number}: not valid UTF-8 JSON ({exc})") from exc
            yield Record(item, rel, number, str(path), unit="line")


def read_csv_rows(path: Path, rel: str) -> Iterator[Record]:
    """Each data row of a CSV file with a header row, as a ``dict`` keyed by the header."""
    with path.open(newline="", encoding="utf-8") as handle:
        try:
            for index, row in enumerate(csv.DictReader(handle)):
                yield Record(row, rel, index, str(path), unit="row")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not valid UTF-8 ({exc})") from exc


def read_text_lines(path: Path, rel: str) -> Iterator[Record]:
    """Each line of a UTF-8 text file, without its line ending; ``index`` is the 1-based line."""
    with path.open(encoding="utf-8", newline="") as handle:
        try:
            for number, line in enumerate(handle, start=1):
                yield Record(line.rstrip("\r\n"), rel, number, str(path), unit="line")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not valid UTF-8 ({exc})") from exc


def plain_strings(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """``batch`` with its ``large_string`` and ``string_view`` columns as plain ``string``.

    Polars writes Parquet text as ``large_string``, and a copy re-saved by it is still the
    dataset; but Arrow compute functions that cleaners build rows with take only matching string
    types (``binary_join_element_wise`` of a ``large_string`` column and a ``str``), or, for the
    view type, none at all. A batch holds far less than the 2 GiB a ``string`` column can; a
    column that does not fit is left as it is.
    """
    schema = batch.schema
    wide = [i for i, f in enumerate(schema) if f.type != pa.string() and is_text_type(f.type)]
    if not wide:
        return batch
    columns = list(batch.columns)
    fields = list(schema)
    for i in wide:
        try:
            columns[i] = columns[i].cast(pa.string())
        except pa.ArrowInvalid:  # over 2 GiB of text: it stays as it was
            continue
        fields[i] = fields[i].with_type(pa.string())
    return type(batch).from_arrays(columns, schema=pa.schema(fields, metadata=schema.metadata))


def check_utf8(batch: pa.RecordBatch | pa.Table, origin: str, first: int) -> None:
    """Stop at text that is not valid UTF-8, naming the row (``first``: the batch's first row).

    Parquet does not check that a ``string`` column holds UTF-8, nor does pyarrow when it reads
    one: such bytes would otherwise be copied into an output that no reader accepts, or stop a
    record-by-record cleaner with a UnicodeDecodeError traceback. Only columns that hold text
    (strings, or structs and lists of them) are checked (about 1.8 GB/s); a column found invalid
    otherwise is named as such.
    """
    for name, column in zip(batch.column_names, batch.columns, strict=True):
        if not _holds_text(column.type):
            continue
        try:
            column.validate(full=True)
        except pa.ArrowInvalid as exc:
            row = _first_undecodable(column)
            if row is None:
                raise InputError(
                    f"{origin} rows {first}..{first + len(column) - 1}: column {name!r} is not "
                    f"valid Arrow data ({exc}); the file is damaged: re-download it"
                ) from exc
            raise InputError(
                f"{origin} row {first + row}: column {name!r} holds text that is not valid UTF-8 "
                f"({exc}); the file is damaged or was written with another encoding: "
                "re-download it, or fix that row"
            ) from exc


def _holds_text(kind: pa.DataType) -> bool:
    """Whether a column of type ``kind`` holds strings, itself or inside a struct, list or map
    (``meta: struct<title: string>``): those are validated; numbers and binary are not."""
    if is_text_type(kind):
        return True
    if pa.types.is_struct(kind):
        return any(_holds_text(kind.field(i).type) for i in range(kind.num_fields))
    if pa.types.is_map(kind):
        return _holds_text(kind.key_type) or _holds_text(kind.item_type)
    value_type = getattr(kind, "value_type", None)  # list, large_list, fixed_size_list, ...
    return value_type is not None and _holds_text(value_type)


def _first_undecodable(column: pa.Array | pa.ChunkedArray) -> int | None:
    """Position of the first value of ``column`` that Python cannot decode (None if none is)."""
    for position, value in enumerate(column):
        try:
            value.as_py()
        except UnicodeDecodeError:
            return position
    return None


def parquet_batches(batch_rows: int = 16_384, columns: Sequence[str] | None = None) -> Reader:
    """A reader yielding each Parquet file as Arrow record batches of at most ``batch_rows`` rows.

    ``columns``: read only these (a large unused column, such as SYNTH's reasoning traces, is
    then never decoded); a file lacking one of them is an error naming the file. Text columns
    come as ``string`` whatever type the file stores (:func:`plain_strings`).
    """

    def read(path: Path, rel: str) -> Iterator[Record]:
        try:
            parquet = pq.ParquetFile(path, buffer_size=1 << 20, pre_buffer=False)
        except Exception as exc:  # pyarrow raises ArrowInvalid/OSError variants
            raise InputError(f"{path}: not a readable Parquet file ({exc})") from exc
        if columns is not None:
            # pyarrow silently skips a requested column that the file lacks.
            missing = [name for name in columns if name not in parquet.schema_arrow.names]
            if missing:
                raise InputError(
                    f"{path}: column(s) {missing} missing (found {parquet.schema_arrow.names}); "
                    "is this the right dataset?"
                )
        first = 0
        batches = parquet.iter_batches(
            batch_size=batch_rows, columns=list(columns) if columns is not None else None
        )
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except (pa.ArrowException, OSError) as exc:
                raise InputError(
                    f"{path}: unreadable after row {first} ({exc}); re-download it"
                ) from exc
            batch = plain_strings(batch)
            check_utf8(batch, str(path), first)
            yield Record(batch, rel, first, str(path), rows=batch.num_rows, unit="row")
            first += batch.num_rows

    return read


def parquet_rows(path: Path, rel: str) -> Iterator[Record]:
    """Each row of a Parquet file as a ``dict``, read a batch at a time."""
    for batch in parquet_batches(_HUB_READ_ROWS)(path, rel):
        for offset, row in enumerate(batch.data.to_pylist()):
            yield Record(row, rel, batch.index + offset, str(path), unit="row")


@dataclass(frozen=True, slots=True)
class TarMember:
    """A regular file inside an archive: its path in the archive and its bytes."""

    name: str
    data: bytes


def _decompressed(path: Path) -> BinaryIO:
    """``path`` opened for reading through gzip, bz2 or xz (chosen by magic bytes), or as-is."""
    with path.open("rb") as probe:
        magic = probe.read(6)
    if magic.startswith(b"\x1f\x8b"):
        return gzip.open(path, "rb")
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")
    return path.open("rb")


def tar_members(keep: Callable[[str], bool] = lambda name: True) -> Reader:
    """A reader yielding the regular files of a (compressed) tar archive, in archive order.

    The archive is streamed (``r|``), never extracted; members whose name ``keep`` rejects are
    skipped without reading their data.
    """

    def read(path: Path, rel: str) -> Iterator[Record]:
        index = 0
        try:
            with _decompressed(path) as stream, tarfile.open(fileobj=stream, mode="r|") as archive:
                for member in archive:
                    if not member.isfile() or not keep(member.name):
                        continue
                    handle = archive.extractfile(member)
                    data = handle.read() if handle is not None else b""
                    yield Record(
                        TarMember(member.name, data), member.name, index, str(path), unit="member"
                    )
                    index += 1
                # tarfile stops quietly at a truncated header; reading the stream to its end
                # makes gzip/bz2/xz check their end marker and checksum.
                while stream.read(1 << 20):
                    pass
        except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
            raise InputError(
                f"{path}: not a readable tar archive, or damaged after {index} members ({exc}); "
                "re-download it"
            ) from exc

    return read


# ---------------------------------------------------------------------------------------------
# Sources.


@dataclass(frozen=True)
class LocalFiles:
    """Raw files under a folder (``include`` globs, each listing sorted) or one file.

    ``how_to_get`` is the command (or instruction) that produces ``default``; the missing-source
    message shows it. ``hub_repo``: the files are those of a Hub dataset repository (e.g.
    ``train.csv`` of ``sapientinc/sudoku-extreme``), downloaded into ``default`` with
    ``huggingface_hub`` on first use when no local copy exists. Leave it unset for the large
    downloads that the original also left to the user (FLAN, SYNTH).
    """

    default: str
    reader: Reader
    include: tuple[str, ...] = ()
    how_to_get: str = ""
    hub_repo: str | None = None

    def describe(self) -> str:
        what = f"{self.default}/{{{','.join(self.include)}}}" if self.include else self.default
        return f"raw {what}"

    def present(self, override: Path | None = None) -> bool:
        return (override or Path(self.default)).exists()

    def _missing(self, path: Path, what: str) -> InputError:
        hint = f"Get it with:\n  {self.how_to_get}\n" if self.how_to_get else ""
        return InputError(
            f"{what} not found: {path}\n{hint}or pass --source PATH to read a copy kept elsewhere."
        )

    def files(self, override: Path | None = None) -> list[tuple[Path, str]]:
        """The (path, name relative to the root) pairs to read, in reading order."""
        root = override or Path(self.default)
        if not root.exists() and override is None and self.hub_repo is not None:
            self._fetch(root)
        if not root.exists():
            raise self._missing(root, "raw input")
        if not self.include:
            if not root.is_file():
                raise InputError(
                    f"{root} is a folder; this source is a single file ({self.default})"
                )
            return [(root, root.name)]
        if not root.is_dir():
            raise InputError(f"{root} is not a folder; this source is a folder ({self.default})")
        found: dict[Path, str] = {}
        for pattern in self.include:
            matches = sorted(path for path in root.glob(pattern) if path.is_file())
            if not matches and not any(ch in pattern for ch in "*?["):
                raise self._missing(root / pattern, f"required file {pattern}")
            for path in matches:
                found.setdefault(path, path.relative_to(root).as_posix())
        if not found:
            raise self._missing(root, f"files matching {list(self.include)}")
        return list(found.items())

    def _fetch(self, root: Path) -> None:
        """Download the ``include`` files of ``hub_repo`` into ``root`` (a temporary name first)."""
        from huggingface_hub import snapshot_download  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

        reason = hub_unreachable()  # at once, instead of ~20 s of retries in snapshot_download
        if reason is not None:
            offline = "" if offline_by_environment() else "; without network, set HF_HUB_OFFLINE=1"
            raise self._missing(
                root,
                f"raw input (and Hub repository {self.hub_repo} unreachable: {reason}{offline})",
            )
        # A download killed midway (its folder is named by its pid) goes once its process has.
        remove_dead_siblings(root.parent, root.name, "partial Hub download")
        partial = root.parent / f"{temporary_prefix(root.name)}0"
        try:
            snapshot_download(
                self.hub_repo,
                repo_type="dataset",
                allow_patterns=list(self.include) or None,
                local_dir=partial,
            )
        except Exception as exc:  # offline, unknown repository, HTTP errors: all mean "not here"
            shutil.rmtree(partial, ignore_errors=True)
            raise self._missing(
                root, f"raw input (and Hub repository {self.hub_repo} unreachable: {exc})"
            ) from exc
        partial.replace(root)

    def records(self, override: Path | None = None) -> Iterator[Record]:
        files = self.files(override)  # checked before the first record is asked for
        return (record for path, rel in files for record in _read_checked(self.reader, path, rel))


def _read_checked(reader: Reader, path: Path, rel: str) -> Iterator[Record]:
    """``reader``'s records of ``path``, which must not be a Git LFS pointer (read as text it
    would give rows of the pointer's lines). An empty file is read as what it is: no rows where
    its format allows that (JSONL, text), else said to be empty, not a parse error."""
    with path.open("rb") as file:
        placeholder = placeholder_of(file.read(64))
    if placeholder is None:
        yield from reader(path, rel)
        return
    what, fix = placeholder
    if path.stat().st_size:
        raise InputError(f"{path}: {what}; {fix}")
    try:
        yield from reader(path, rel)
    except InputError as err:
        raise InputError(f"{path}: {what}; {fix}") from err


def _import_datasets() -> Any:
    """``datasets``, imported without torch/TensorFlow support unless someone imported it before.

    With torch installed, ``datasets`` imports it for every streamed dataset (to share an epoch
    counter with DataLoader workers): about 700 MB of resident memory that reading Arrow tables
    never uses. Its documented ``USE_TORCH``/``USE_TF`` switches are read once, at import; they
    are set only around that import, so other libraries in the process see the environment as it was.
    """
    if "datasets" in sys.modules:
        quiet_newly_imported("datasets")  # a quiet scope of the runner may be open
        return sys.modules["datasets"]
    saved = {name: os.environ.get(name) for name in ("USE_TORCH", "USE_TF")}
    os.environ.update(USE_TORCH="0", USE_TF="0")
    try:
        import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    quiet_newly_imported("datasets")
    return datasets


@dataclass(frozen=True)
class HubDataset:
    """A Hub dataset: ``repo_id`` with ``config`` (or ``all_configs``) and ``splits``.

    ``splits=None`` reads every split in the dataset's own order. ``batch_rows`` set: records are
    Arrow tables of that many rows (vectorised cleaners); unset: one ``dict`` per row.
    """

    repo_id: str
    config: str | None = None
    splits: tuple[str, ...] | None = ("train",)
    all_configs: bool = False
    streaming: bool = True
    batch_rows: int | None = None

    @property
    def default(self) -> str:
        return (HUB_COPIES_ROOT / self.repo_id).as_posix()

    def describe(self) -> str:
        config = "all configs" if self.all_configs else (self.config or "default")
        splits = "all splits" if self.splits is None else "+".join(self.splits)
        return f"hub {self.repo_id} [{config}] {splits}"

    def present(self, override: Path | None = None) -> bool:
        return (override or Path(self.default)).exists()

    def _hint(self) -> str:
        """How to get a local copy (for a failure while reading from the Hub)."""
        offline = (
            ""
            if offline_by_environment()
            else "\nOn a machine without network, set HF_HUB_OFFLINE=1: nothing then tries the Hub."
        )
        return (
            f"To work without network access, download it first:\n"
            f"  hf download {self.repo_id} --repo-type dataset --local-dir {self.default}\n"
            f"(the cleaner reads that folder when it exists), or pass --source FOLDER.{offline}"
        )

    def _location(self, override: Path | None) -> str:
        if override is not None:
            if not override.is_dir():
                missing = "does not exist" if not override.exists() else "is not a folder"
                raise InputError(
                    f"--source {override} {missing}; for {self.repo_id} pass the folder "
                    f"that `hf download {self.repo_id} --repo-type dataset --local-dir FOLDER` made"
                )
            return str(override)
        local = Path(self.default)
        return str(local) if local.is_dir() else self.repo_id

    def _require_hub(self) -> None:
        """Fail at once, before ``datasets`` spends ~20 s retrying, when the Hub is unreachable."""
        reason = hub_unreachable()
        if reason is not None:
            raise InputError(
                f"Hub dataset {self.repo_id}: no local copy at {self.default}, and the Hub cannot "
                f"be used ({reason}).\n{self._hint()}"
            )

    def _failure(
        self, what: str, location: str, exc: Exception, file: str | None, after: int | None = None
    ) -> InputError:
        """The error for a failed ``datasets`` call: the file it failed on when known and, for a
        local copy, what is wrong with that file rather than a download hint. ``after``: rows of
        the split read before the failure (None: it failed while opening)."""
        cause = f"{type(exc).__name__}: {exc}"
        if after is not None:
            what = f"{what}, after {after:,} rows"
        if file is None and isinstance(exc, OSError) and exc.filename:
            file = str(exc.filename)
        path = local_path(file) if file is not None else None
        local = Path(location).is_dir()
        if local and path is not None and path.exists():
            return self._damaged_file(path, location, what, cause)
        if local:
            return InputError(
                f"cannot load {what} of Hub dataset {self.repo_id} from the local copy "
                f"{location}: {cause}\nCheck that {location} is a complete copy of {self.repo_id}, "
                f"as `hf download {self.repo_id} --repo-type dataset --local-dir {location}` makes "
                "it: its README.md names the configs, splits and their data files."
            )
        where = f" (file {file})" if file is not None else ""
        return InputError(
            f"cannot load {what} of Hub dataset {self.repo_id}{where}: {cause}\n{self._hint()}"
        )

    def _damaged_file(self, path: Path, location: str, what: str, cause: str) -> InputError:
        """A file of a local copy that failed to read: which, what seems wrong, how to replace it
        (not "download a copy": there is one)."""
        rel = _relative_to(path, location)
        shown = path if rel is None else Path(location) / rel
        fix = (
            "Replace it with an intact copy of that file."
            if rel is None
            else f"Replace it with an intact copy: `hf download {self.repo_id} {rel} "
            f"--repo-type dataset --local-dir {location}` fetches only that file."
        )
        if path.suffix == ".parquet" and parquet_row_count(path) == 0:
            fix = "If the split is meant to be empty, remove the file from the copy."
        return InputError(
            f"{shown}: cannot read this file of the local copy of {self.repo_id} ({what}): "
            f"{cause}\n{damage_of(path)}. {fix}"
        )

    def _open(self, what: str, location: str, call: Callable[[], Any]) -> Any:
        """Run a ``datasets`` call that resolves files, turning its failure into an InputError."""
        with failed_file_log() as log:
            try:
                return call()
            except DataIoError:
                raise
            except Exception as exc:  # datasets/hub raise many types (ConnectionError, ValueError)
                raise self._failure(what, location, exc, log.file) from exc

    def records(self, override: Path | None = None) -> Iterator[Record]:
        location = self._location(override)  # checked before the first record is asked for
        if not Path(location).is_dir():  # no local copy: it streams from the Hub
            self._require_hub()
        return self._records(location)

    def _records(self, location: str) -> Iterator[Record]:
        datasets = _import_datasets()
        if self.all_configs:
            configs: list[str | None] = list(
                self._open(
                    "the config list", location, lambda: datasets.get_dataset_config_names(location)
                )
            )
        else:
            configs = [self.config]
        for config in configs:
            # ``None`` is the dataset's only (unnamed) config; ``datasets`` calls it "default".
            config_name = config or "default"
            splits = self.splits
            if splits is None:
                whole = self._open(
                    f"config {config_name}",
                    location,
                    lambda c=config: datasets.load_dataset(location, c, streaming=self.streaming),
                )
                splits = tuple(whole.keys())
            for split in splits:
                what = f"config {config_name}, split {split}"
                dataset = self._open(
                    what,
                    location,
                    lambda c=config, s=split: datasets.load_dataset(
                        location, c, split=s, streaming=self.streaming
                    ),
                )
                yield from self._split_records(dataset, f"{config_name}/{split}", what, location)

    def _guarded(self, tables: Iterator[Any], what: str, location: str) -> Iterator[Any]:
        """``tables``, with a read failure in the middle of a split reported with its location.

        ``tables`` is closed on the way out, early exit included: an unfinished Arrow scan left
        for the interpreter's shutdown to collect aborts the process (apache/arrow#45214). The
        files Arrow's threads still hold are waited for after a finished read too: a local copy
        read to its end aborted once at exit, under load, after its report was printed
        (``test_module_reads_the_default_local_copy`` of OpenMathInstruct-2, a fresh clone's
        ``make test``).
        """
        count = 0
        before = closed_files()
        try:
            while True:
                with failed_file_log() as log:
                    try:
                        table = next(tables)
                    except StopIteration:
                        return
                    except DataIoError:
                        raise
                    except Exception as exc:  # network drop, corrupt shard: many possible types
                        raise self._failure(what, location, exc, log.file, count) from exc
                count += table.num_rows
                yield table
        finally:
            close = getattr(tables, "close", None)
            if close is not None:
                close()
            wait_for_abandoned_reads(before=before)

    def _split_records(self, dataset: Any, name: str, what: str, location: str) -> Iterator[Record]:
        origin = f"{location} {name}"
        rows = self.batch_rows or _HUB_READ_ROWS
        first = 0
        tables = dataset.with_format("arrow").iter(batch_size=rows)
        for table in self._guarded(tables, what, location):
            check_utf8(table, origin, first)
            if self.batch_rows:
                table = plain_strings(table)  # a copy saved by polars: large_string
                yield Record(table, name, first, origin, rows=table.num_rows)
            else:
                for offset, row in enumerate(table.to_pylist()):
                    yield Record(row, name, first + offset, origin)
            first += table.num_rows


def _relative_to(path: Path, folder: str) -> str | None:
    """``path`` relative to ``folder`` (both resolved), or None when it lies elsewhere."""
    try:
        return path.resolve().relative_to(Path(folder).resolve()).as_posix()
    except (ValueError, OSError):
        return None


Source = LocalFiles | HubDataset
