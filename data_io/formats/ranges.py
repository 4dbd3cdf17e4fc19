"""A large uncompressed text or JSONL file cut into byte ranges at document boundaries, so that
several scale units share it and, read one after the other, give exactly the documents of the
whole file (with the same line numbers in their errors); a large compressed one cut into ranges
of its text by target offsets, the cuts found by each unit as it decompresses (``TextRange``);
a large Parquet file cut into runs of row groups (a row is a document).

A JSONL row, or a document of a ``--doc-per-line`` text, is a line: any line start is a
boundary. A text document is a block of lines ended by a blank line (only whitespace, as
Python's ``str.isspace`` sees it; a line that is not UTF-8 is not blank): a range ends just
after a blank line. ``datasets`` sources stay whole.

A compressed file made of parts that decode on their own (zstd frames, BGZF members, xz blocks,
any bzip2 file's blocks: ``_core.compressed_parts`` finds them from their headers and magics) is
cut as an uncompressed one is, at part starts about ``unit_bytes`` of the file apart
(``PartsRange``): each range decompresses only its own parts, and a little of the next to find
where its last document ends.

A gzip file of one member (what ``gzip`` and ``pigz`` write), or of members without BGZF's
lengths, is decompressed once by the plan to find entry points about ``unit_bytes`` of its text
apart (``_core.gzip_entry_points``: where a deflate block starts, with the 32 KiB of text before
it; candidates a quarter of a range apart, then those nearest the even cuts of the text), and
cut at them (``TextRange`` with its ``point``): each range decompresses only
its own text and a little of the next, as ranges of parts do. The plan's pass costs about a
reading of the file on one thread; a file that does not decompress is refused there, naming
the byte. A file with no point to cut at (a small one, or one long deflate block: zlib-ng's
level 1) is cut as below.

Any other compressed file cannot be entered in the middle: each of its ranges decompresses all
the text before it, so cutting a file into ``k`` ranges decompresses it ``k / 2`` times over (and the
last range waits for most of it). So a compressed file is cut only when it holds at least an
eighth of the run's bytes on disk (with more files than that, whole files already make the
units), its text's length is estimated from a sample, and it is cut into at most
``MOST_RANGES[compression]`` ranges: about as many as keep the extra decompressing under half
of prepare's own work (``1 + D / P``, with ``P`` prepare's 40 MB/s a core and ``D`` the text's
decompression on this VM: zstd 389, gzip 184, xz 86 MB/s). A bzip2 file of one block (up to
900 kB of text) stays whole: it is too small to cut.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from data_io import _core
from data_io.errors import InputError
from data_io.formats.raw_text import (
    ByteRange,
    GzipPoint,
    PartsRange,
    RowGroups,
    Source,
    TextRange,
)

__all__ = [
    "COMPRESSED_SHARE",
    "MOST_GZIP_RANGES",
    "MOST_RANGES",
    "GzipPasses",
    "PassPending",
    "document_ranges",
    "gzip_point_ranges",
    "gzip_ranges",
    "in_two_rounds",
]

_Cut = TypeVar("_Cut")
_COUNT_CHUNK = 16 << 20
# Ranges a compressed file is cut into at most, by its compression, and the share of the run's
# input it must hold to be cut (see the module's docstring).
MOST_RANGES = {"zst": 8, "gz": 5, "xz": 3, "bz2": 1}  # gz: where it has no entry points
COMPRESSED_SHARE = 8
# Candidate entry points the plan's pass finds a range, the nearest to each cut then taken.
_CANDIDATES_A_RANGE = 4
# Ranges a gzip file is cut into at most at entry points: the plan records each point's 32 KiB
# window (about 12 KB deflated, in base64), so that a plan stays near 12 MB a file at most.
MOST_GZIP_RANGES = 1024
# Text decompressed to estimate a compressed file's length.
_SAMPLE_BYTES = 16 << 20
# A gzip file from which size the plan says it decompresses it to find entry points (at about
# 150 MB/s of the file on one thread: seven seconds).
_SAY_PASS_BYTES = 1 << 30


def document_ranges(
    source: Source,
    unit_bytes: int,
    doc_per_line: bool,
    run_bytes: int = 0,
    passes: GzipPasses | None = None,
) -> list[ByteRange] | list[TextRange] | list[PartsRange] | list[RowGroups]:
    """Ranges of about ``unit_bytes`` covering ``source`` in order, or ``[]`` when it is read
    whole (small, one row group, a ``datasets`` source, or a compressed stream holding less
    than an eighth of ``run_bytes``, the run's inputs on disk; a compressed file of parts is
    cut as an uncompressed one is). ``passes``: where a gzip stream's pass for entry points
    is asked (``in_two_rounds``); None: it runs here."""
    size = source.size
    if source.compression is not None and source.kind in ("txt", "jsonl"):
        if unit_bytes <= 0 or size * 8 <= unit_bytes:
            return []  # text rarely shrinks eightfold: not worth a look
        starts = _core.compressed_parts(str(source.path), source.compression)
        if len(starts) > 1:
            return parts_ranges(starts, size, unit_bytes)
        if source.size * COMPRESSED_SHARE < run_bytes:
            return []
        if source.compression == "gz":
            # None: no entry point to cut at (one long block: zlib-ng's level 1).
            cut = gzip_ranges(source, unit_bytes, passes)
            if cut is not None:
                return cut
        return _text_ranges(source, unit_bytes)
    if unit_bytes <= 0 or size <= unit_bytes or source.compression is not None:
        return []
    if source.kind == "parquet":
        return _row_group_ranges(source, unit_bytes)
    if source.kind not in ("txt", "jsonl"):
        return []
    blocks = source.kind == "txt" and not doc_per_line
    count = max(1, round(size / unit_bytes))
    cuts = [0]
    with open(source.path, "rb") as f:
        for k in range(1, count):
            target = k * size // count
            if target <= cuts[-1]:
                continue
            cut = _boundary_from(f, target, blocks)
            if cut is None or cut >= size:
                break
            if cut > cuts[-1]:
                cuts.append(cut)
    if len(cuts) == 1:
        return []
    lines = _first_lines(source.path, cuts)
    ends = [*cuts[1:], size]
    return [ByteRange(start, end, line) for start, end, line in zip(cuts, ends, lines, strict=True)]


def parts_ranges(starts: list[int], size: int, unit_bytes: int) -> list[PartsRange]:
    """Ranges of a file of parts starting at ``starts``, cut at the first part start at or
    after each multiple of about ``unit_bytes`` of the file (on disk, as Parquet's row groups
    are counted), or ``[]`` when they make one."""
    count = max(1, round(size / unit_bytes))
    cuts = [0]
    for k in range(1, count):
        at = bisect.bisect_left(starts, k * size // count)
        if at < len(starts) and starts[at] > cuts[-1]:
            cuts.append(starts[at])
    if len(cuts) == 1:
        return []
    return [PartsRange(start, end, size) for start, end in itertools.pairwise([*cuts, size])]


def gzip_ranges(
    source: Source, unit_bytes: int, passes: GzipPasses | None = None
) -> list[TextRange] | None:
    """A gzip file cut at entry points into ranges of about ``unit_bytes`` of text
    (``MOST_GZIP_RANGES`` at most), ``[]`` when it makes one range, or None when it has no
    entry point (one deflate block). The count is estimated from a sample before the plan's
    pass, then set from the text's exact length (``gzip_point_ranges``)."""
    estimate = _core.text_length_estimate(str(source.path), source.compression, _SAMPLE_BYTES)
    count = min(round(estimate / unit_bytes) if unit_bytes > 0 else 0, MOST_GZIP_RANGES)
    if count <= 1:
        return []
    return gzip_point_ranges(
        source.path,
        source.size,
        count,
        recount=lambda total: min(round(total / unit_bytes), MOST_GZIP_RANGES),
        passes=passes,
    )


def gzip_point_ranges(
    path: Path,
    size: int,
    count: int,
    recount: Callable[[int], int] | None = None,
    passes: GzipPasses | None = None,
) -> list[TextRange] | None:
    """The gzip file ``path`` (``size`` bytes) cut at entry points into about ``count``
    ranges even in text (``recount``: the count from the text's length, once the pass knows
    it), ``[]`` when that makes one range, or None when it has no entry point (one deflate
    block). The plan's pass finds candidates about a quarter of a range apart, then takes the
    one nearest each multiple of ``total / count``, however the compression varies along the
    file. Range ``k`` runs from the cut for one byte past point ``k``'s text offset (the
    first, from the text's start) to the next range's; the last to the text's end,
    ``total``. A file that does not decompress is refused (``InputError``, naming the byte).
    ``passes``: where the pass is asked (``in_two_rounds``); None: it runs here."""
    every = -(-size // (_CANDIDATES_A_RANGE * max(count, 1)))
    if passes is None:
        _say_pass(path, size, count)
        found, total, _ = _core.gzip_entry_points(str(path), every)
    else:
        found, total = passes.index(path, every, size, count)
    if recount is not None:
        count = recount(total)
    # A point at the text's last byte would start a range past the text.
    candidates = [GzipPoint(*p) for p in found if p[1] + 1 < total]
    if not candidates:
        return None
    if count <= 1:
        return []
    points = _nearest(candidates, [k * total // count for k in range(1, count)])
    starts = [0, *(point.text + 1 for point in points)]
    ends = [*starts[1:], total]
    entries: list[GzipPoint | None] = [None, *points]
    return [
        TextRange(start, end, total, point)
        for start, end, point in zip(starts, ends, entries, strict=True)
    ]


class PassPending(Exception):
    """A gzip stream's entry points asked of ``GzipPasses`` before its passes ran."""


class GzipPasses:
    """The plan's passes over gzip streams for entry points, asked in a first round and run
    together (``_core.gzip_entry_points_of``: one file a thread), so that a plan of several
    big streams waits for the longest pass, not for their sum (``in_two_rounds``)."""

    def __init__(self) -> None:
        # (path, spacing) -> (size, count) asked; -> (points, text length) found.
        self._asked: dict[tuple[str, int], tuple[int, int]] = {}
        self._found: dict[tuple[str, int], tuple[list[tuple[Any, ...]], int]] = {}

    def index(
        self, path: Path, every: int, size: int, count: int
    ) -> tuple[list[tuple[Any, ...]], int]:
        """The points about ``every`` bytes apart in ``path`` and its text's length, once the
        passes ran; ``PassPending`` until then (the pass is noted)."""
        key = (str(path), every)
        if key not in self._found:
            self._asked[key] = (size, count)
            raise PassPending(key)
        return self._found[key]

    def run(self) -> None:
        """Every pass asked and not run yet, together."""
        keys = [key for key in self._asked if key not in self._found]
        for key in keys:
            _say_pass(Path(key[0]), *self._asked[key])
        if keys:
            found = _core.gzip_entry_points_of([(Path(path), every) for path, every in keys])
            self._found.update(
                (key, (points, total)) for key, (points, total, _) in zip(keys, found, strict=True)
            )


def in_two_rounds(count: int, cut: Callable[[int, GzipPasses], _Cut]) -> list[_Cut]:
    """``cut(k, passes)`` for each ``k`` below ``count`` (a planner's cutting of its ``k``-th
    file), the gzip passes that any of them asks (``PassPending``) run together between a first
    round and a second for those that asked."""
    passes = GzipPasses()
    done: dict[int, _Cut] = {}
    for k in range(count):
        with contextlib.suppress(PassPending):  # asked: cut in the second round
            done[k] = cut(k, passes)
    passes.run()
    return [done[k] if k in done else cut(k, passes) for k in range(count)]


def _say_pass(path: Path, size: int, count: int) -> None:
    """Why the plan waits, before a pass of seconds to minutes."""
    if size >= _SAY_PASS_BYTES:
        print(
            f"data_io: decompressing {path} ({size / 1e9:.1f} GB) once to find "
            f"where about {count} units can start in it",
            file=sys.stderr,
            flush=True,
        )


def _nearest(points: list[GzipPoint], targets: list[int]) -> list[GzipPoint]:
    """For each of the rising ``targets``, the point whose text offset is nearest, each taken
    once (rising)."""
    texts = [point.text for point in points]
    chosen: list[GzipPoint] = []
    for target in targets:
        at = bisect.bisect_left(texts, target)
        near = min(
            (k for k in (at - 1, at) if 0 <= k < len(points)),
            key=lambda k: abs(texts[k] - target),
        )
        if not chosen or points[near].text > chosen[-1].text:
            chosen.append(points[near])
    return chosen


def _text_ranges(source: Source, unit_bytes: int) -> list[TextRange]:
    """A compressed file's text in up to ``MOST_RANGES`` ranges of about ``unit_bytes`` (by its
    estimated length), or ``[]``. A file under an eighth of a unit on disk is not sampled: text
    rarely shrinks eightfold."""
    most = MOST_RANGES.get(source.compression or "", 1)
    if unit_bytes <= 0 or source.size * 8 <= unit_bytes or most <= 1:
        return []
    total = _core.text_length_estimate(str(source.path), source.compression, _SAMPLE_BYTES)
    count = min(round(total / unit_bytes), most)
    if count <= 1:
        return []
    cuts = [k * total // count for k in range(count + 1)]
    return [TextRange(start, end, total) for start, end in itertools.pairwise(cuts)]


def _boundary_from(f: BinaryIO, target: int, blocks: bool) -> int | None:
    """The first document boundary at or after ``target`` (the file's size, or None, at its
    end)."""
    f.seek(target - 1)
    f.readline()  # to just past the newline at or after target - 1: a line start >= target
    if not blocks:
        return f.tell()
    while line := f.readline():
        if _is_blank(line):
            return f.tell()
    return None


def _is_blank(line: bytes) -> bool:
    try:
        return line.decode("utf-8").isspace()
    except UnicodeDecodeError:
        return False


def _first_lines(path: Path, cuts: list[int]) -> list[int]:
    """The number (from 1) of the line starting at each of the sorted offsets ``cuts``."""
    numbers = []
    newlines, at = 0, 0
    with open(path, "rb") as f:
        for cut in cuts:
            while at < cut:
                chunk = f.read(min(_COUNT_CHUNK, cut - at))
                newlines += chunk.count(b"\n")
                at += len(chunk)
            numbers.append(newlines + 1)
    return numbers


def _row_group_ranges(source: Source, unit_bytes: int) -> list[RowGroups]:
    """Runs of consecutive row groups, each closed when its compressed size reaches
    ``unit_bytes``; ``[]`` for a file of one run."""
    import pyarrow as pa  # noqa: PLC0415  heavy: pyarrow, only for Parquet data
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet data

    try:
        metadata = pq.ParquetFile(source.path).metadata
    except (pa.ArrowException, OSError) as err:
        raise InputError(
            f"{source.name}: not a readable Parquet file ({err}); re-write or re-download it"
        ) from err
    total = metadata.num_row_groups
    runs: list[RowGroups] = []
    start, first_row, rows, size = 0, 0, 0, 0
    for group in range(total):
        meta = metadata.row_group(group)
        size += sum(meta.column(c).total_compressed_size for c in range(meta.num_columns))
        rows += meta.num_rows
        if size >= unit_bytes or group == total - 1:
            runs.append(RowGroups(start, group + 1, first_row, total))
            start, first_row, rows, size = group + 1, first_row + rows, 0, 0
    return runs if len(runs) > 1 else []
