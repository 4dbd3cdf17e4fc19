"""Talking to the Hugging Face Hub through ``datasets``: is it reachable, and which file failed.

- :func:`hub_unreachable` (from :mod:`data_io.util.hub`, shared with the other stages): one quick
  request, made once per process, tells an offline machine at once.
- :func:`failed_file_log`: when ``datasets`` cannot read a data file it logs the file's path and
  re-raises an exception that does not name it. This catches that log record, so that our error
  names the file, and keeps the duplicate line off stderr.
- :func:`damage_of`: a guess, from its first and last bytes, at what is wrong with a local file
  that failed to read (empty, a Git LFS pointer, a truncated Parquet file, ...).
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import re
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

from data_io.util.hub import HUB_PROBE_SECONDS, hub_unreachable, offline_by_environment

__all__ = [
    "HUB_PROBE_SECONDS",
    "closed_files",
    "damage_of",
    "failed_file_log",
    "hub_unreachable",
    "local_path",
    "offline_by_environment",
    "parquet_row_count",
    "wait_for_abandoned_reads",
]


class _FailedFile(logging.Filter):
    """Remembers the first file an ERROR record of ``datasets`` names, and drops that record.

    ``datasets``' packaged readers (Parquet, JSON, CSV, Arrow, text) all log
    ``... file '<path>' with error ...`` just before re-raising a reader's exception.
    """

    _QUOTED = re.compile(r"'([^']+)'")

    def __init__(self) -> None:
        super().__init__()
        self.file: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR:
            return True
        match = self._QUOTED.search(record.getMessage())
        if match is None:
            return True
        if self.file is None:
            self.file = match.group(1)
        return False  # our InputError says it, with the file and what to do


class _Discard(logging.Handler):
    """A handler that prints nothing (``logging.NullHandler`` would skip its filters too)."""

    def emit(self, record: logging.LogRecord) -> None:
        pass


@contextlib.contextmanager
def failed_file_log() -> Iterator[_FailedFile]:
    """Within the block, ``.file`` of the yielded object is the data file ``datasets`` failed on.

    The filter sits on our own handler (so that the record is seen even if ``datasets``' default
    handler was removed) and on the handlers already there (so that they do not print it).
    """
    logger = logging.getLogger("datasets")
    caught = _FailedFile()
    ours = _Discard()
    handlers = [*logger.handlers, ours]
    for handler in handlers:
        handler.addFilter(caught)
    logger.addHandler(ours)
    try:
        yield caught
    finally:
        logger.removeHandler(ours)
        for handler in handlers:
            handler.removeFilter(caught)


def local_path(file: str) -> Path | None:
    """The local path in a file name ``datasets`` logged, or None when it names a remote file.

    In a chained name (``zip://member::/data/x.zip``) the last link is the file on disk.
    """
    name = file.split("::")[-1]
    name = name.removeprefix("file://")
    if "://" in name:
        return None
    return Path(name)


def placeholder_of(head: bytes) -> tuple[str, str] | None:
    """Whether a data file whose first bytes are ``head`` only stands where the data should
    be, empty or a Git LFS pointer (a clone made without Git LFS holds these): what it is,
    and how to get the data."""
    if not head:
        return "it is empty (an interrupted download?)", "re-download it"
    if head.startswith(b"version https://git-lfs"):
        return (
            "it is a Git LFS pointer, not the data (a `git clone` made without git-lfs?)",
            "run `git lfs pull` in that clone, or download the file itself",
        )
    return None


def damage_of(path: Path) -> str:
    """What seems wrong with ``path``, a local data file that failed to read."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(64)
            handle.seek(max(size - 4, 0))
            tail = handle.read(4)
    except OSError as exc:
        return f"it cannot be opened ({exc.strerror or exc})"
    placeholder = placeholder_of(head)
    if placeholder is not None:
        return placeholder[0]
    if path.suffix == ".parquet":
        if not head.startswith(b"PAR1"):
            return "it is not a Parquet file (it does not start with PAR1)"
        if tail != b"PAR1":
            return "it is truncated: its Parquet footer is missing (an interrupted download?)"
        if parquet_row_count(path) == 0:
            # `datasets` sizes its reads from the first row group's rows: 0 fails in Arrow.
            return (
                "it is an intact Parquet file of 0 rows, which `datasets` cannot read (it sizes "
                "its batches from the first row group)"
            )
        return "its Parquet data is damaged"
    kind = path.suffix.lstrip(".").upper() or "data"
    return f"its content is not valid {kind} (damaged, truncated, or not what its name says)"


def parquet_row_count(path: Path) -> int | None:
    """The rows a Parquet file's footer records, or None when the footer cannot be read."""
    import pyarrow.parquet as pq  # noqa: PLC0415  only on an error's path; the CLI starts cheap

    try:
        return int(pq.ParquetFile(path).metadata.num_rows)
    except (OSError, ValueError):  # ArrowInvalid is a ValueError, ArrowIOError an OSError
        return None


def closed_files() -> weakref.WeakSet[io.IOBase]:
    """The file objects closed now: passed to :func:`wait_for_abandoned_reads` as ``before``,
    so that it waits only for files closed by the scan in between."""
    return weakref.WeakSet(
        obj for obj in gc.get_objects() if isinstance(obj, io.IOBase) and _is_closed(obj)
    )


def wait_for_abandoned_reads(
    timeout: float = 30.0, before: weakref.WeakSet[io.IOBase] | None = None
) -> None:
    """Wait until Arrow's worker threads let go of the files of a scan stopped half-way.

    ``datasets`` gives Arrow Python file objects to read. When the scan is stopped early (a row
    error), Arrow's worker threads may still hold such a file for a moment; if they let go of it
    while the interpreter is shutting down, taking the GIL ends the worker inside a C++ destructor
    and the process aborts ("terminate called without an active exception", apache/arrow#45214).
    A full collection frees the scan's objects caught in reference cycles; then every closed file
    that no Python object refers to any more (so only native code holds it) is waited for.

    ``before``: files closed before the scan began (``closed_files()``), not waited for. A
    running frame's locals are not among the objects ``gc`` sees, so a file closed there looks
    natively held and lives on: a ``spawn``ed worker's pipe from its parent, which the
    interpreter's own ``spawn_main`` read and closed, cost every Hub cleaner's scan on a
    ``clean --executor local`` worker the whole ``timeout``.
    """
    gc.collect()
    held = [ref for ref in _natively_held_files() if before is None or ref() not in before]
    deadline = time.monotonic() + timeout
    while any(ref() is not None for ref in held) and time.monotonic() < deadline:
        time.sleep(0.01)


def _natively_held_files() -> list[weakref.ref[io.IOBase]]:
    objects = gc.get_objects()
    files = [obj for obj in objects if isinstance(obj, io.IOBase) and _is_closed(obj)]
    del objects  # it refers to every object: it must not count as a referrer below
    held = []
    for file in files:
        referrers = [ref for ref in gc.get_referrers(file) if ref is not files]
        if not referrers:
            held.append(weakref.ref(file))
    return held


def _is_closed(file: io.IOBase) -> bool:
    try:
        return bool(file.closed)
    except Exception:  # a file object half torn down: not one a scan is reading
        return False
