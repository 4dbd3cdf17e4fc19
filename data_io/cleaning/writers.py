"""Writing cleaned rows: JSON Lines or Parquet, one file or one file per key, atomically.

Every file is written under a temporary name beside its target (``<name>.tmp-<pid>@<host>``,
an extension the tokenizer does not pick up) and renamed into place only when the whole cleaner
succeeded; on failure the temporary files are removed and existing outputs stay untouched. A
later run removes the temporaries of killed runs of this machine only: a folder shared by
cleaners (``data/Platypus``) may be written by another machine's run at the same time.
Several files are replaced as one group (:func:`data_io.cleaning.group_commit.replace_group`): a failure among their
renames puts the previous files back, and a run killed there leaves a note from which the
next run does the same, so new and old files are never left mixed.

Memory stays bounded however large the input and however many output files there are:

- JSON Lines goes straight to the file (polars' NDJSON writer: compact, non-ASCII kept, the
  same bytes as ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))``).
- Parquet rows wait in a per-file buffer until they fill a row group (``row_group_rows`` rows or
  ``row_group_bytes``); when all buffers together exceed ``buffer_bytes`` the largest are
  flushed early, so no group is ever held whole.
- At most ``max_open`` files are open at once (about 50 kB each for Parquet). A JSON Lines file
  that had to be closed is reopened for appending; a Parquet file cannot be, so its next row
  group starts a new part file, and the parts are concatenated row group by row group when the
  output is committed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from data_io.cleaning.group_commit import (
    remove_stale_temporaries,
    replace_group,
    settle_groups_over,
    undo_interrupted_groups,
    unlink_quietly,
)
from data_io.cleaning.rows import FILE_COLUMN, ROW_COLUMNS
from data_io.errors import OutputError
from data_io.util.stale import owner_token

Format = Literal["jsonl", "parquet"]
_FORMAT_NAMES = {"jsonl": "JSON Lines", "parquet": "Parquet"}

#: The Parquet schema of every output: three plain ``string`` columns, which every reader
#: (the original's included) accepts.
PARQUET_SCHEMA = pa.schema([(name, pa.string()) for name in ROW_COLUMNS])


@dataclass(frozen=True)
class OutputSpec:
    """Where a cleaner writes by default: one file (``keyed=False``) or a folder of files named
    by each row's ``file`` key plus the format's extension (``keyed=True``)."""

    path: str
    format: Format
    keyed: bool

    @property
    def extension(self) -> str:
        return "." + self.format

    def describe(self) -> str:
        return f"{self.path}/<file>{self.extension}" if self.keyed else self.path


def jsonl_file(path: str) -> OutputSpec:
    return OutputSpec(path, "jsonl", keyed=False)


def jsonl_files(folder: str) -> OutputSpec:
    return OutputSpec(folder, "jsonl", keyed=True)


def parquet_file(path: str) -> OutputSpec:
    return OutputSpec(path, "parquet", keyed=False)


def parquet_files(folder: str) -> OutputSpec:
    return OutputSpec(folder, "parquet", keyed=True)


# Pieces a Parquet buffer may hold before they are concatenated into one.
_MAX_PENDING_PIECES = 32


def _parquet_writer(path: Path) -> pq.ParquetWriter:
    # Only ``condition`` (a handful of values) gains from dictionary encoding; for the text
    # columns pyarrow would try a dictionary, overflow it and fall back, for nothing.
    return pq.ParquetWriter(path, PARQUET_SCHEMA, use_dictionary=["condition"])


def _temporary(final: Path, suffix: str = "") -> Path:
    return final.with_name(f"{final.name}.tmp-{owner_token()}{suffix}")


# How to fix an output that cannot be written, by errno. ENOTDIR/EEXIST (a file where a folder
# should be) name the file in the way, found by :func:`_file_in_the_way`.
_OUTPUT_FIXES = {
    errno.EACCES: "no permission to write there: pass --out with a writable location, or fix "
    "the folder's permissions",
    errno.EPERM: "writing there is not permitted: pass --out with a writable location",
    errno.EROFS: "the file system is read-only: pass --out with a location on a writable disk",
    errno.ENOSPC: "the disk is full: free some space, or pass --out with a location on another disk",
    errno.EDQUOT: "the disk quota is used up: free some space, or pass --out with another location",
    errno.ENOENT: "files cannot be created there (a virtual or vanished folder?): pass --out "
    "with a location in an ordinary writable folder",
}


def output_error(target: Path, exc: OSError) -> OutputError:
    """One line: the output that cannot be written, why (from ``exc``'s errno), how to fix it."""
    blocker = _file_in_the_way(target)
    if blocker is not None:
        fix = f"{blocker} is a file, not a folder: pass --out with another location, or move it"
    else:
        fix = _OUTPUT_FIXES.get(
            exc.errno or 0, "pass --out with a location where files can be created"
        )
    reason = exc.strerror or str(exc)
    return OutputError(f"cannot write the output {target} ({reason}): {fix}")


def _file_in_the_way(target: Path) -> Path | None:
    """The first of ``target``'s parent folders that exists as something other than a folder."""
    for parent in reversed(target.parents):
        if parent.exists() and not parent.is_dir():
            return parent
    return None


def _check_writable(target: Path, folder: Path) -> None:
    """Fail before any input is read when no file can be created in ``folder`` (or, when it does
    not exist yet, in its nearest existing parent, where it would be created). A probe file is
    created and removed: permission bits say nothing for root, nor about a read-only mount."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise output_error(target, NotADirectoryError(errno.ENOTDIR, "Not a directory"))
    probe = existing / f".{target.name}.probe.tmp-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass  # a probe of ours, left by a run with the same pid: the folder is writable
    except OSError as exc:
        raise output_error(target, exc) from exc
    unlink_quietly(probe)


def _as_row_table(table: pa.Table) -> pa.Table:
    """The row columns (and ``file`` if present), in writer order, as plain ``string``."""
    names = [*ROW_COLUMNS, FILE_COLUMN] if FILE_COLUMN in table.column_names else list(ROW_COLUMNS)
    if table.column_names == names and all(t == pa.string() for t in table.schema.types):
        return table
    return pa.table({name: table.column(name).cast(pa.string()) for name in names})


class _JsonlSink:
    """One JSON Lines output; reopened in append mode after being closed to free a descriptor."""

    def __init__(self, final: Path, on_open: Callable[[_Sink], None]) -> None:
        self.final = final
        self.tmp = _temporary(final)
        self.rows = 0
        self.pending_bytes = 0  # JSON Lines is never buffered here
        self._on_open = on_open
        self._handle: BinaryIO | None = None
        self._started = False

    def write(self, table: pa.Table) -> None:
        if self._handle is None:
            self._on_open(self)
            self._handle = self.tmp.open("ab" if self._started else "wb", buffering=1 << 20)
            self._started = True
        if table.num_rows:
            pl.from_arrow(table).write_ndjson(self._handle)
            self.rows += table.num_rows

    def flush(self) -> None:
        """Nothing is buffered beyond the OS file buffer."""

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def finish(self) -> Path:
        """Complete the file under its temporary name; returns that name."""
        if not self._started:
            self.write(PARQUET_SCHEMA.empty_table())
        self.close()
        return self.tmp

    def abort(self) -> None:
        self.close()
        unlink_quietly(self.tmp)


class _ParquetSink:
    """One Parquet output: rows buffered up to a row group, then written to the open part."""

    def __init__(
        self,
        final: Path,
        on_open: Callable[[_Sink], None],
        row_group_rows: int,
        row_group_bytes: int,
    ) -> None:
        self.final = final
        self.rows = 0
        self.pending_bytes = 0
        self._on_open = on_open
        self._row_group_rows = row_group_rows
        self._row_group_bytes = row_group_bytes
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._parts: list[Path] = []
        self._writer: pq.ParquetWriter | None = None

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        self._pending.append(table)
        self._pending_rows += table.num_rows
        self.pending_bytes += table.nbytes
        self.rows += table.num_rows
        if len(self._pending) >= _MAX_PENDING_PIECES:
            # Many small pieces (one per batch, for a file among hundreds) cost more in per-object
            # overhead than in text; one contiguous copy keeps the budget honest.
            self._pending = [pa.concat_tables(self._pending).combine_chunks()]
        if (
            self._pending_rows >= self._row_group_rows
            or self.pending_bytes >= self._row_group_bytes
        ):
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one row group (opening a new part file if needed)."""
        if not self._pending:
            return
        if self._writer is None:
            self._on_open(self)
            part = _temporary(self.final, f".part{len(self._parts)}")
            self._parts.append(part)
            self._writer = _parquet_writer(part)
        table = pa.concat_tables(self._pending)
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self._pending.clear()
        self._pending_rows = 0
        self.pending_bytes = 0

    def close(self) -> None:
        """Close the part file (buffered rows stay buffered; they go to a new part later)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def finish(self) -> Path:
        """Complete the file under a temporary name (its parts merged); returns that name."""
        self.flush()
        self.close()
        if not self._parts:  # a single-file output that received no rows: still a valid file
            tmp = _temporary(self.final)
            pq.write_table(PARQUET_SCHEMA.empty_table(), tmp)
            return tmp
        if len(self._parts) == 1:
            return self._parts[0]
        tmp = _temporary(self.final)
        with _parquet_writer(tmp) as merged:
            for part in self._parts:
                parquet = pq.ParquetFile(part)
                for index in range(parquet.num_row_groups):
                    group = parquet.read_row_group(index)
                    merged.write_table(group, row_group_size=max(group.num_rows, 1))
        for part in self._parts:
            unlink_quietly(part)
        self._parts.clear()
        return tmp

    def abort(self) -> None:
        self.close()
        self._pending.clear()
        for part in self._parts:
            unlink_quietly(part)
        unlink_quietly(_temporary(self.final))


_Sink = _JsonlSink | _ParquetSink


class OutputWriter:
    """Routes validated tables to their output files; ``commit`` renames them into place.

    Use as a context manager: leaving the block with an exception aborts (removes every
    temporary file); ``commit()`` must be called explicitly on success.
    """

    def __init__(
        self,
        spec: OutputSpec,
        path: Path | None = None,
        *,
        max_open: int = 1024,
        buffer_bytes: int = 128 << 20,
        row_group_rows: int = 65_536,
        row_group_bytes: int = 64 << 20,
    ) -> None:
        self.spec = spec
        self.path = Path(path if path is not None else spec.path)
        self._max_open = _allow_open_files(max(1, max_open))
        self._buffer_bytes = buffer_bytes
        self._row_group_rows = row_group_rows
        self._row_group_bytes = row_group_bytes
        self._sinks: dict[str, _Sink] = {}
        self._open: OrderedDict[int, _Sink] = OrderedDict()  # by id(sink), least recent first
        self._pending_bytes = 0
        self._done = False
        self._prepared = False
        if spec.keyed and self.path.exists() and not self.path.is_dir():
            raise OutputError(
                f"--out {self.path} must be a folder: this cleaner writes several files"
            )
        if not spec.keyed:
            if self.path.is_dir():
                raise OutputError(f"--out {self.path} is a folder: this cleaner writes one file")
            other = {".jsonl", ".parquet"} - {spec.extension}
            if self.path.suffix in other:
                # The tokenizer reads a file by its extension: JSON Lines named .parquet fails.
                raise OutputError(
                    f"--out {self.path}: this cleaner writes {_FORMAT_NAMES[spec.format]}, not "
                    f"{self.path.suffix}; name it {self.path.with_suffix(spec.extension)}"
                )
            self._sink("")  # created up front so that an empty run still writes an empty file
        _check_writable(self.path, self.path if spec.keyed else self.path.parent)

    def _prepare(self) -> None:
        """Create the output folder on first use, so that a run failing early leaves nothing."""
        if self._prepared:
            return
        folder = self.path if self.spec.keyed else self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise output_error(self.path, exc) from exc
        prefix = "" if self.spec.keyed else f"{self.path.name}.tmp-"
        if self.spec.keyed:
            # Before their set-aside files count as stale: those are the previous outputs.
            left = undo_interrupted_groups(folder)
            if left:
                raise OutputError(
                    f"{left[0]} was left by a clean run stopped while it replaced the files of "
                    f"{folder}, and their previous files could not be put back now either; "
                    "nothing was written. Put back each '<name>.tmp-<pid>@<host>.old' file there as "
                    "'<name>' (or delete the folder's outputs), remove the note, and run again"
                )
        remove_stale_temporaries(folder, prefix)
        self._prepared = True

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None or not self._done:
            self.abort()

    def _sink(self, key: str) -> _Sink:
        sink = self._sinks.get(key)
        if sink is None:
            final = self.path / f"{key}{self.spec.extension}" if self.spec.keyed else self.path
            if self.spec.format == "jsonl":
                sink = _JsonlSink(final, self._opening)
            else:
                sink = _ParquetSink(
                    final, self._opening, self._row_group_rows, self._row_group_bytes
                )
            self._sinks[key] = sink
        elif id(sink) in self._open:
            self._open.move_to_end(id(sink))
        return sink

    def _opening(self, sink: _Sink) -> None:
        """Called by a sink about to open a file: close the least recently used beyond the limit."""
        self._open[id(sink)] = sink
        while len(self._open) > self._max_open:
            _, oldest = self._open.popitem(last=False)
            # Its buffered rows go to the file still open: a file whose rows have all arrived
            # (an earlier FLAN subset, say) then ends as one part, with nothing to merge.
            self._pending_bytes -= oldest.pending_bytes
            oldest.flush()
            oldest.close()

    def write(self, table: pa.Table) -> None:
        """Write a validated table (with the ``file`` column when the output is keyed)."""
        if not table.num_rows:
            return
        self._prepare()
        try:
            table = _as_row_table(table)  # once per batch; sinks receive normalised tables
            parts = [("", table)] if not self.spec.keyed else _split_by_key(table)
            for key, part in parts:
                sink = self._sink(key)
                before = sink.pending_bytes
                sink.write(part)
                self._pending_bytes += sink.pending_bytes - before
            if self._pending_bytes > self._buffer_bytes:
                self._flush_largest()
        except OSError as exc:
            raise output_error(self.path, exc) from exc

    def _flush_largest(self) -> None:
        """Flush the fullest buffers until half the budget is free."""
        for sink in sorted(self._sinks.values(), key=lambda s: s.pending_bytes, reverse=True):
            if self._pending_bytes <= self._buffer_bytes // 2 or not sink.pending_bytes:
                break
            self._pending_bytes -= sink.pending_bytes
            sink.flush()

    def commit(self) -> list[tuple[Path, int]]:
        """Finish every file and rename it into place; returns (path, rows), sorted by path."""
        self._prepare()
        sinks = sorted(self._sinks.values(), key=lambda s: str(s.final))
        try:
            ready = [(sink.finish(), sink.final) for sink in sinks]
            self._open.clear()
            if len(ready) > 1:
                replace_group(ready, self.path)
            else:  # one file: one rename, atomic by itself
                for tmp, final in ready:
                    # Another group's note may list its name (a keyed folder, or a file
                    # beside one: data/Platypus).
                    settle_groups_over(final.parent, {final.name})
                    os.replace(tmp, final)
        except OutputError:  # says what and how to fix already (an OSError, no errno)
            self.abort()
            raise
        except OSError as exc:
            self.abort()
            raise output_error(self.path, exc) from exc
        except BaseException:  # Ctrl-C, SIGTERM's SystemExit: nothing committed either
            self.abort()
            raise
        self._done = True
        return [(sink.final, sink.rows) for sink in sinks]

    def abort(self) -> None:
        """Remove every temporary file, best effort (the error that led here is the one to show)."""
        for sink in self._sinks.values():
            with contextlib.suppress(OSError):
                sink.abort()
        self._open.clear()
        self._done = True


def _allow_open_files(wanted: int) -> int:
    """Raise the soft open-file limit towards ``wanted`` + a margin; how many we may keep open."""
    margin = 64  # descriptors left for the reader, Python and the libraries
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted + margin:
        target = wanted + margin if hard == resource.RLIM_INFINITY else min(wanted + margin, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - margin))


def _split_by_key(table: pa.Table) -> list[tuple[str, pa.Table]]:
    """The table's rows grouped by the ``file`` column (rows keep their order within a key).

    Each group is a compact copy (``take``), not a slice: a slice would keep the whole batch
    alive while any of its groups waits in a buffer, and the byte budget would undercount it.
    """
    keys = table.column(FILE_COLUMN)
    rows = table.drop_columns([FILE_COLUMN])
    first = keys[0].as_py()
    if pc.all(pc.equal(keys, first)).as_py():
        return [(first, rows)]
    order = pc.sort_indices(keys)  # a stable sort: rows of one key stay in source order
    sorted_keys = keys.take(order)
    if isinstance(sorted_keys, pa.ChunkedArray):
        sorted_keys = sorted_keys.combine_chunks()
    runs = pc.run_end_encode(sorted_keys)
    groups = []
    start = 0
    for end, key in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
        groups.append((key, rows.take(order.slice(start, end - start))))
        start = end
    return groups
