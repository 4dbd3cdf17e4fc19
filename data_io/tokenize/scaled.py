"""``tokenize`` as a scale-out stage (``data_io.stage.Stage``): the files a run would (re-)tokenize
cut into units, each unit encoded into its part, and the output assembled by ``tokenize`` itself.

Plan: the core's own incremental check says which files need work; each is one unit when small,
a big plain JSONL file is cut into byte ranges that start at line starts, a big Parquet file into
ranges of row groups, a big compressed JSONL file of parts (BGZF members, zstd frames) into runs
of parts, and a big one-member ``.jsonl.gz`` at entry points into its deflate stream (one zstd
frame cannot be entered mid-stream and stays whole). Units are listed largest first, so that
workers taking them in order finish together.

Finalize: ``tokenize`` over the plan's inputs with the units' parts, which writes every task
folder, record and ``tokenizer_info.json`` exactly as one run on one machine does (the parts are
only where the encoded arrays come from).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

from data_io import _core
from data_io.errors import ConfigError, InputError
from data_io.formats.ranges import (
    COMPRESSED_SHARE,
    MOST_GZIP_RANGES,
    GzipPasses,
    gzip_point_ranges,
    in_two_rounds,
    parts_ranges,
)
from data_io.formats.raw_text import GzipPoint
from data_io.stage import (
    PLAN_AGAIN,
    THREADS_VARIABLE,
    Finalized,
    Plan,
    SavedPlan,
    Unit,
    numbered,
    unit_record,
)
from data_io.tokenize.api import tokenize, tokenize_options
from data_io.tokenize.options import TokenizeOptions
from data_io.tokenize.result import TokenizeResult
from data_io.tokenize.summary import print_summary
from data_io.util.fs import sha256


class TokenizeStage:
    name: ClassVar[str] = "tokenize"

    def plan(self, request: dict[str, Any], *, unit_bytes: int) -> Plan:
        """Units of about ``unit_bytes`` of input each; ``request`` is ``tokenize_options``'s
        dict."""
        if unit_bytes < 1:
            raise ConfigError(f"the unit size must be positive, not {unit_bytes} bytes")
        # Absolute paths: units, finalize and `resume` may run from any folder or node.
        options = {
            **request,
            "inputs": [str(Path(p).resolve()) for p in request["inputs"]],
            "output": str(Path(request["output"]).resolve()),
            "tokenizer_path": str(Path(request["tokenizer_path"]).resolve()),
            "progress": False,
            "parts": None,
        }
        stale = json.loads(_core.tokenize_stale(json.dumps(options)))
        run_bytes = sum(task["size"] for task in stale)
        units: list[Unit] = []
        inputs = []
        stats = [Path(task["source"]).stat() for task in stale]
        # The gzip streams' passes for entry points run together, a file a thread.
        cut = in_two_rounds(
            len(stale),
            lambda k, passes: _spans(
                Path(stale[k]["source"]), stats[k].st_size, unit_bytes, run_bytes, passes
            ),
        )
        for task, stat, spans in zip(stale, stats, cut, strict=True):
            inputs.append(
                {
                    "task": task["task"],
                    "source": task["source"],
                    "size": stat.st_size,
                    "mtime_ns": stat.st_mtime_ns,
                    "reason": task["reason"],
                }
            )
            for index, (span, size) in enumerate(spans):
                units.append(
                    Unit(
                        id="",
                        task=task["task"],
                        source=task["source"],
                        span=span,
                        index=index,
                        count=len(spans),
                        bytes=size,
                    )
                )
        # Largest first (then by task and place, for a stable order); ids follow that order.
        units.sort(key=lambda u: (-u.bytes, u.task, u.index))
        tokenizer = Path(options["tokenizer_path"])
        return Plan(
            stage=self.name,
            output=options["output"],
            options=options,
            units=numbered(units),
            inputs=inputs,
            fingerprint={"tokenizer": str(tokenizer), "tokenizer_sha256": sha256(tokenizer)},
            unit_bytes=unit_bytes,
        )

    def check_options(self, options: dict[str, Any]) -> None:
        """``tokenize_options``' dict: its options of its types, then its own checks."""
        planned = TokenizeOptions.from_dict(options, stage=self.name)
        tokenize_options(planned.inputs, planned.output, **planned.keywords())

    def part_dir(self, plan: SavedPlan, unit: Unit) -> Path:
        """``parts/<task>/<index>``: the encoded arrays of one span of one file."""
        task = PurePosixPath(unit.task)
        if not unit.task or task.is_absolute() or ".." in task.parts:  # an edited plan
            raise ConfigError(
                f"{plan.path}: unit {unit.id}: task {unit.task!r} leads outside the plan's "
                f"parts folder; {PLAN_AGAIN}"
            )
        return plan.parts_dir / unit.task / f"{unit.index:06d}"

    def run_unit(self, plan: SavedPlan, unit: Unit, threads: int | None) -> dict[str, Any]:
        if threads is None and os.environ.get(THREADS_VARIABLE):
            threads = int(os.environ[THREADS_VARIABLE])
        if unit.span.get("kind") != "whole":
            _check_unchanged(plan, unit)
        options = {**plan.options, "threads": threads, "progress": False, "parts": None}
        span, window = _unit_span(unit.span)
        spec = {
            "task": unit.task,
            "source": unit.source,
            "span": span,
            "index": unit.index,
            "count": unit.count,
            "part_dir": str(self.part_dir(plan, unit)),
        }
        started = time.time()
        report = json.loads(_core.tokenize_unit(json.dumps(options), json.dumps(spec), window))
        part = report["part"]
        return unit_record(
            unit,
            started,
            reused=report["reused"],
            seconds=report["seconds"],
            rows=part["rows"],
            tokens=part["tokens"],
            bad_rows=part["bad_rows"],
            outputs=part["arrays"],
            encoder=part["encoder"],
        )

    def finalize(self, plan: SavedPlan, *, missing: list[Unit], progress: bool | None) -> Finalized:
        kwargs = TokenizeOptions.from_dict(plan.options, stage=self.name).keywords()
        if progress is not None:
            kwargs["progress"] = progress
        result = tokenize(
            plan.options["inputs"],
            plan.options["output"],
            parts=plan.parts_dir,
            check=False,
            **kwargs,
        )
        if not result.failed:
            shutil.rmtree(plan.parts_dir, ignore_errors=True)
        return Finalized(result, {"failed_files": [f.task for f in result.failed]})

    def report(self, result: TokenizeResult, *, quiet: bool) -> int:
        if not quiet:
            print_summary(result, problems=False)
        result.raise_for_failures()
        return 0


STAGE = TokenizeStage()


def _check_unchanged(plan: SavedPlan, unit: Unit) -> None:
    """A unit of part of a file reads the bytes, row groups or compressed parts the plan found:
    a file changed since (another size or time) would be cut elsewhere, and its rows read from
    mid-line or past a row's end, whose errors would blame lines that are fine. (A whole file
    is read as it is now: finalize uses its part only if the content is the one encoded.)"""
    entry = next((e for e in plan.inputs if e.get("source") == unit.source), None)
    if entry is None or "size" not in entry or "mtime_ns" not in entry:
        return
    try:
        stat = Path(unit.source).stat()
    except FileNotFoundError:
        raise InputError(
            f"{unit.source}: gone since the plan was made; run the command that made the plan "
            "again (it plans what is there now)"
        ) from None
    if (stat.st_size, stat.st_mtime_ns) != (entry["size"], entry["mtime_ns"]):
        raise ConfigError(
            f"{unit.source}: changed since the plan was made ({entry['size']:,} bytes then, "
            f"{stat.st_size:,} now); run the command that made the plan again (the same "
            "`data_io tokenize ... --executor ...`): it plans the changed file anew and keeps "
            "the units already done (`data_io resume` runs the old plan)"
        )


# Compressed JSONL that `tokenize` reads, by name ending, with `_core`'s name of its compression.
_COMPRESSED_JSONL = {".jsonl.gz": "gz", ".jsonl.zst": "zst"}


def _spans(
    source: Path, size: int, unit_bytes: int, run_bytes: int, passes: GzipPasses
) -> list[tuple[dict[str, Any], int]]:
    """(span, bytes) of each unit of one file, in file order; ``run_bytes``: the size of every
    file the run encodes; ``passes``: where a gzip stream's pass is asked."""
    name = source.name.lower()
    if size > unit_bytes and name.endswith(".jsonl"):
        return _line_ranges(source, size, unit_bytes)
    if size > unit_bytes and name.endswith(".parquet"):
        return _row_group_ranges(source, unit_bytes)
    compression = next((c for end, c in _COMPRESSED_JSONL.items() if name.endswith(end)), None)
    if size > unit_bytes and compression:
        return _part_ranges(source, size, unit_bytes, compression, run_bytes, passes)
    return [({"kind": "whole"}, size)]


def _part_ranges(
    source: Path,
    size: int,
    unit_bytes: int,
    compression: str,
    run_bytes: int,
    passes: GzipPasses,
) -> list[tuple[dict[str, Any], int]]:
    """Runs of a compressed file's parts (BGZF members, zstd frames) of about ``unit_bytes`` on
    disk; each unit decodes its own parts and finds its lines' start and end in their text
    (``rust/reader/frames/line_cut.rs``). A gzip file of one part (what ``gzip`` and ``pigz``
    write) is cut at entry points instead (``_point_ranges``), when it holds at least an eighth
    of the run's bytes: the plan decompresses it to find them, on one thread, where among many
    files whole files already make the units; one zstd frame is one unit: its text can only be
    read from its start."""
    starts = _core.compressed_parts(str(source), compression)
    ranges = parts_ranges(starts, size, unit_bytes)
    if not ranges and compression == "gz" and len(starts) <= 1:
        if size * COMPRESSED_SHARE < run_bytes:
            return [({"kind": "whole"}, size)]
        return _point_ranges(source, size, unit_bytes, passes)
    if not ranges:
        return [({"kind": "whole"}, size)]
    return [({"kind": "parts", "start": r.start, "end": r.end}, r.end - r.start) for r in ranges]


def _point_ranges(
    source: Path, size: int, unit_bytes: int, passes: GzipPasses
) -> list[tuple[dict[str, Any], int]]:
    """A gzip stream cut at entry points into about ``size / unit_bytes`` ranges even in text
    (``formats.ranges.gzip_point_ranges``: the plan decompresses the file once), each read
    from its point by its unit (``rust/reader/frames/text_range.rs``); one unit when it has
    no point to cut at (one long deflate block: zlib-ng's level 1). A unit's bytes are its
    share of the file on disk."""
    count = min(round(size / unit_bytes), MOST_GZIP_RANGES)
    ranges = gzip_point_ranges(source, size, count, passes=passes) if count > 1 else None
    if not ranges:
        return [({"kind": "whole"}, size)]
    spans: list[tuple[dict[str, Any], int]] = []
    for r in ranges:
        span: dict[str, Any] = {"kind": "text", "start": r.start, "end": r.end, "total": r.total}
        if r.point is not None:
            span["point"] = r.point.record()
        spans.append((span, size * (r.end - r.start) // max(r.total, 1)))
    return spans


def _unit_span(span: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
    """A unit's span as ``_core.tokenize_unit`` takes it, and its gzip entry point's window:
    the plan keeps the window deflated in the point's record; the core takes its numbers in the
    span and the window beside it."""
    record = span.get("point")
    if span.get("kind") != "text" or record is None:
        return span, None
    point = GzipPoint.from_record(record)
    numbers = {
        name: getattr(point, name) for name in ("bit", "text", "newlines", "member_text", "crc")
    }
    return {**span, "point": numbers}, point.window


def _line_ranges(source: Path, size: int, unit_bytes: int) -> list[tuple[dict[str, Any], int]]:
    """Byte ranges of about ``unit_bytes``, each moved forward to the next line start (a
    range with no line start left is merged into the one before)."""
    count = max(1, round(size / unit_bytes))
    cuts = [0]
    with open(source, "rb") as f:
        for k in range(1, count):
            target = k * size // count
            if target <= cuts[-1]:
                continue
            f.seek(target - 1)
            f.readline()  # to just past the newline at or after target - 1
            cut = f.tell()
            if cuts[-1] < cut < size:
                cuts.append(cut)
    cuts.append(size)
    return [
        ({"kind": "bytes", "start": start, "end": end}, end - start)
        for start, end in itertools.pairwise(cuts)
    ]


def _row_group_ranges(source: Path, unit_bytes: int) -> list[tuple[dict[str, Any], int]]:
    """Consecutive row groups, closed when their compressed size reaches ``unit_bytes``."""
    import pyarrow.parquet as pq  # noqa: PLC0415  heavy: pyarrow, only for Parquet/Arrow data

    try:
        metadata = pq.ParquetFile(source).metadata
    except Exception as exc:  # pyarrow's errors for empty, truncated or foreign files vary
        raise InputError(
            f"{source}: not a readable Parquet file ({exc}); fix or remove it, then plan again"
        ) from None
    spans: list[tuple[dict[str, Any], int]] = []
    start, size = 0, 0
    for group in range(metadata.num_row_groups):
        size += metadata.row_group(group).total_byte_size
        if size >= unit_bytes:
            spans.append(({"kind": "row_groups", "start": start, "end": group + 1}, size))
            start, size = group + 1, 0
    if start < metadata.num_row_groups or not spans:
        spans.append(({"kind": "row_groups", "start": start, "end": metadata.num_row_groups}, size))
    if len(spans) == 1:
        return [({"kind": "whole"}, os.path.getsize(source))]
    return spans
