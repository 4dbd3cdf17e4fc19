"""Running one cleaner: source records -> the cleaner's function -> validated rows -> writer.

A cleaner module only describes its dataset (a :class:`Cleaner`); this module does the rest the
same way for all of them: reads the source as a stream, validates every emitted row, counts
drops by reason, batches rows into Arrow tables for the writer, turns a failed assertion into an
error naming the source row, commits the outputs only when everything succeeded, and prints a
summary. ``Cleaner.main`` is what ``python -m pipe.clean_x`` runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm import tqdm

from data_io.cleaning.rows import (
    FILE_COLUMN,
    ROW_COLUMNS,
    CleanerAssertion,
    ConditionChecker,
    Drop,
    DropCounts,
    Row,
    is_row_drop,
    row_problem,
    table_problem,
)
from data_io.cleaning.sources import HubDataset, Record, Source
from data_io.cleaning.writers import OutputSpec, OutputWriter
from data_io.errors import DataIoError, InputError
from data_io.util.cache import cache_root
from data_io.util.closed_stdout import exit_quietly_on_closed_stdout
from data_io.util.console import on_terminal, quiet_hub_libraries
from data_io.util.fs import write_json_atomic
from data_io.util.interrupt import started
from data_io.util.words import counted

#: What a cleaner's function may yield for one record.
Emitted = Row | Drop | pa.Table | pa.RecordBatch
CleanFunction = Callable[[Record], Iterable[Emitted]]


@dataclass(frozen=True)
class Cleaner:
    """One dataset's cleaner: where it reads, where it writes, and how a record becomes rows.

    ``clean`` receives each :class:`Record` of ``source`` and yields :class:`Row` /
    :class:`Drop` objects (or, for vectorised cleaners reading Arrow batches, Arrow tables with
    the columns ``condition``, ``instruction``, ``response`` and, for a keyed output, ``file``).
    It raises :class:`CleanerAssertion` when the source breaks an invariant.
    """

    name: str
    source: Source
    output: OutputSpec
    clean: CleanFunction
    description: str = ""
    #: Rows collected from ``Row`` objects before they are handed to the writer as one table.
    batch_rows: int = 8192

    def run(
        self,
        source: Path | None = None,
        out: Path | None = None,
        *,
        progress: bool | None = None,
        writer_options: dict[str, Any] | None = None,
    ) -> CleanReport:
        return run_cleaner(self, source, out, progress=progress, writer_options=writer_options)

    def main(self, argv: list[str] | None = None) -> int:
        """Command-line entry of ``python -m <module>``: ``[--source PATH] [--out PATH]``."""
        started()  # `python -m pipe.clean_x`: its imports are done (data_io.util.interrupt)
        parser = argparse.ArgumentParser(
            prog=f"clean {self.name}", description=self.description or f"Clean {self.name}."
        )
        add_run_arguments(parser, self)

        def command() -> int:
            args = parser.parse_args(argv)
            return run_and_report(self, args.source, args.out, quiet=args.quiet)

        # Shared with `data_io`: `python -m pipe.clean_x | head` ends without a traceback.
        return exit_quietly_on_closed_stdout(command)


def add_run_arguments(parser: argparse.ArgumentParser, cleaner: Cleaner | None = None) -> None:
    """--source, --out and --quiet, with their defaults: ``cleaner``'s own paths when there is
    one cleaner (``python -m pipe.clean_x``), else where each cleaner's are listed."""
    each = "each cleaner's own, shown by --list"
    source = cleaner.source.default if cleaner else each
    out = cleaner.output.path if cleaner else each
    hub = cleaner is None or isinstance(cleaner.source, HubDataset)
    streams = "; a Hub dataset with no local copy there streams from the Hub" if hub else ""
    parser.add_argument(
        "--source",
        type=Path,
        metavar="PATH",
        help="a local copy of the input: for a Hub dataset the folder `hf download` made, "
        f"for raw data the file or folder named in cleaners.md (default: {source}{streams})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="PATH",
        help="output file (cleaners writing one file) or folder (cleaners writing several) "
        f"(default: {out})",
    )
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing but errors: no progress bar, no summary (default: a progress bar "
        "on a terminal, and a summary of each cleaner on stdout)",
    )


@dataclass
class CleanReport:
    """What one run did: records read, rows written per file, drops by reason."""

    name: str
    records: int = 0
    drops: DropCounts = field(default_factory=DropCounts)
    files: list[tuple[Path, int]] = field(default_factory=list)
    # Outputs the last run wrote that this run had no rows for: removed, not left stale.
    removed: list[Path] = field(default_factory=list)
    # What went wrong after the outputs were committed (they stand): printed on stderr.
    warnings: list[str] = field(default_factory=list)

    @property
    def rows_written(self) -> int:
        return sum(rows for _, rows in self.files)

    def format(self) -> str:
        lines = [
            f"{self.name}: {counted(self.records, 'record')} read, "
            f"{counted(self.rows_written, 'row')} written to {counted(len(self.files), 'file')}, "
            f"{drop_totals(self.drops)}"
        ]
        lines += [f"  wrote {path} ({rows:,} rows)" for path, rows in self.files]
        lines += [
            f"  removed {path}: the last run wrote it, this run had no rows for it"
            for path in self.removed
        ]
        lines += [f"  dropped {count:,}: {reason}" for reason, count in sorted(self.drops.items())]
        return "\n".join(lines)


def drop_totals(drops: dict[str, int]) -> str:
    """``N records dropped``, and ``, M rows not made`` when some drops left out only one row
    of a record (``no direct row: ...``; a record may count there twice, once per row)."""
    rows = sum(count for reason, count in drops.items() if is_row_drop(reason))
    records = sum(drops.values()) - rows
    made = f", {counted(rows, 'row')} not made" if rows else ""
    return f"{counted(records, 'record')} dropped{made}"


def _missing_field(record: Record, exc: Exception) -> str:
    """``no field 'q' (its fields: kind, a); `` when ``exc`` is a row's field looked up and not
    there (a renamed column, another version of the dataset); else ``""``."""
    if not isinstance(exc, KeyError) or not isinstance(record.data, dict) or len(exc.args) != 1:
        return ""
    key = exc.args[0]
    if not isinstance(key, str) or key in record.data:
        return ""
    fields = ", ".join(map(str, record.data)) or "none"
    return f"no field {key!r} (its fields: {fields}); "


def _null_fields(record: Record, exc: Exception) -> list[str]:
    """The fields of ``record`` that are null, when ``exc`` is a cleaner tripping over a None
    (``'NoneType' object has no attribute 'strip'``, ``... is not subscriptable``); else []."""
    if "NoneType" not in str(exc) or not isinstance(record.data, dict):
        return []
    return sorted(str(key) for key, value in record.data.items() if value is None)


class _RowBatch:
    """Rows waiting to become one Arrow table, with the record each came from (for errors)."""

    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed
        self.rows: list[Row] = []
        self.records: list[Record] = []

    def take(self, name: str) -> pa.Table:
        columns = list(zip(*self.rows, strict=True))  # transposed in C: no per-row Python here
        names = [*ROW_COLUMNS, FILE_COLUMN] if self.keyed else list(ROW_COLUMNS)
        try:
            table = pa.table(
                {key: pa.array(columns[i], pa.string()) for i, key in enumerate(names)}
            )
        except (UnicodeEncodeError, pa.ArrowException) as exc:
            raise self._unencodable(name, exc) from exc
        self.rows = []
        self.records = []
        return table

    def discard(self, record: Record) -> None:
        """Take back the rows ``record`` yielded (they are the last ones, if still here)."""
        while self.records and self.records[-1] is record:
            self.records.pop()
            self.rows.pop()

    def _unencodable(self, name: str, exc: Exception) -> InputError:
        """Find the row whose text is not valid Unicode (a lone surrogate) and name it."""
        for row, record in zip(self.rows, self.records, strict=True):
            for column, value in zip(ROW_COLUMNS, row, strict=False):
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    return InputError(
                        f"{name}: the row from {record.where()} has text in {column} that is not "
                        f"valid Unicode (lone surrogate); fix or drop it in the cleaner"
                    )
        return InputError(f"{name}: cannot convert rows to Arrow: {exc}")


def run_cleaner(
    cleaner: Cleaner,
    source: Path | None = None,
    out: Path | None = None,
    *,
    progress: bool | None = None,
    writer_options: dict[str, Any] | None = None,
) -> CleanReport:
    """Run ``cleaner``; raises :class:`DataIoError` (nothing committed) when anything fails.

    ``progress``: our bar, and those of ``datasets`` and ``huggingface_hub`` (downloads,
    "Resolving data files", ...); None: only when stderr is a terminal."""
    quiet = progress is False or (progress is None and not on_terminal())
    with quiet_hub_libraries(quiet):
        records = cleaner.source.records(source)  # fails here, with the download hint
        try:
            return _clean_records(cleaner, records, out, progress, writer_options)
        finally:
            # A reader stopped by an error must release its threads now: an unfinished Arrow
            # scan collected during interpreter shutdown aborts the process ("terminate called
            # without an active exception", apache/arrow#45214). Closing the generator chain
            # runs the readers' own clean-up (``finally`` blocks) in order.
            close = getattr(records, "close", None)
            if close is not None:
                close()


def _clean_records(
    cleaner: Cleaner,
    records: Iterator[Record],
    out: Path | None,
    progress: bool | None,
    writer_options: dict[str, Any] | None,
) -> CleanReport:
    name = cleaner.name
    keyed = cleaner.output.keyed
    report = CleanReport(name)
    checker = ConditionChecker()
    batch = _RowBatch(keyed)
    # None: tqdm shows it only on a terminal; True forces it (a pipe, a log file).
    disable = None if progress is None else not progress
    with (
        OutputWriter(cleaner.output, out, **(writer_options or {})) as writer,
        tqdm(
            desc=f"clean {name}", unit="rec", disable=disable, file=sys.stderr, mininterval=1.0
        ) as bar,
    ):
        for record in records:
            report.records += record.rows
            bar.update(record.rows)
            try:
                for item in cleaner.clean(record):
                    if isinstance(item, Row):
                        if not checker.known_good(item, keyed):
                            problem = row_problem(item, checker, keyed)
                            if problem is not None:
                                raise InputError(
                                    f"{name}: bad row from {record.where()}: {problem}"
                                )
                        batch.rows.append(item)
                        batch.records.append(record)
                        if len(batch.rows) >= cleaner.batch_rows:
                            writer.write(batch.take(name))
                    elif isinstance(item, Drop):
                        report.drops.add(item)
                    elif isinstance(item, pa.Table | pa.RecordBatch):
                        table = (
                            item if isinstance(item, pa.Table) else pa.Table.from_batches([item])
                        )
                        problem = table_problem(table, checker, keyed)
                        if problem is not None:
                            raise InputError(f"{name}: bad table from {record.where()}: {problem}")
                        if batch.rows:  # keep source order: earlier rows go first
                            writer.write(batch.take(name))
                        writer.write(table)
                    else:
                        raise InputError(
                            f"{name}: the cleaner yielded a {type(item).__name__} for {record.where()}; "
                            "it must yield Row, Drop or a pyarrow Table"
                        )
            except CleanerAssertion as exc:
                raise InputError(f"{name}: assertion failed at {record.where()}: {exc}") from exc
            except DataIoError:
                raise
            except (AttributeError, TypeError) as exc:
                nulls = _null_fields(record, exc)
                if not nulls:
                    raise InputError(
                        f"{name}: cannot clean {record.where()}: {type(exc).__name__}: {exc} "
                        "(the record does not have the shape this cleaner expects)"
                    ) from exc
                # A null field the cleaner cannot use: the record is dropped and counted (the
                # README's promise), with any rows it had already yielded taken back.
                batch.discard(record)
                report.drops.add(Drop(f"null field: {', '.join(nulls)}", record.rows))
            except Exception as exc:  # a field missing or of an unexpected type in the source
                raise InputError(
                    f"{name}: cannot clean {record.where()}: {_missing_field(record, exc)}"
                    f"{type(exc).__name__}: {exc} "
                    "(the record does not have the shape this cleaner expects)"
                ) from exc
        if batch.rows:
            writer.write(batch.take(name))
        report.files = writer.commit()
    if keyed:
        report.removed = _forget_outputs_not_written(
            writer.path, name, report.files, report.warnings
        )
    return report


def _forget_outputs_not_written(
    folder: Path, name: str, files: list[tuple[Path, int]], warnings: list[str]
) -> list[Path]:
    """A keyed cleaner writes one file per key its rows hold: a key with no rows this run (a
    source file now empty) writes nothing, and its file of the last run would stay and be
    tokenized. Each run records the files it wrote, in the user's cache (the output folder
    holds what the original wrote and nothing else); the files of the last run's record not
    written now are removed. Files the record does not name (another cleaner's, in a shared
    folder) are never touched. The outputs are committed by then: a record that cannot be
    read or written, or a file that cannot be removed, is a warning in ``warnings``."""
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]
    record = cache_root() / "clean-outputs" / digest / f"{name}.json"
    written = sorted(path.name for path, _ in files)
    try:
        before = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        before = []
    removed = []
    for file in before if isinstance(before, list) else []:
        path = folder / str(file)
        if str(file) not in written and path.parent == folder and path.is_file():
            try:
                path.unlink()
            except OSError as exc:
                warnings.append(
                    f"cannot remove {path} ({exc.strerror or exc}), which the last run wrote and "
                    "this run had no rows for: remove it by hand, or it will be tokenized"
                )
                continue
            removed.append(path)
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(record, written)
    except OSError as exc:
        warnings.append(
            f"the outputs are written, but the list of them cannot be saved in {record} "
            f"({exc.strerror or exc}), so a later run cannot remove those it has no rows for: "
            "set XDG_CACHE_HOME to a writable folder"
        )
    return removed


# The exit code of a run stopped by Ctrl-C (128 + SIGINT), as the shell gives it.
INTERRUPTED = 130


def run_and_report(
    cleaner: Cleaner, source: Path | None, out: Path | None, *, quiet: bool = False
) -> int:
    """Run one cleaner, print its summary (stdout) or its error (stderr); the exit code.

    ``quiet``: no progress bar and no summary; an error is still printed.
    """
    try:
        report = run_cleaner(cleaner, source, out, progress=False if quiet else None)
    except DataIoError as exc:
        print(f"clean {cleaner.name}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"clean {cleaner.name}: interrupted; nothing was written", file=sys.stderr)
        return INTERRUPTED
    if not quiet:
        print(report.format())
    for warning in report.warnings:
        print(f"clean {cleaner.name}: warning: {warning}", file=sys.stderr)
    return 0
