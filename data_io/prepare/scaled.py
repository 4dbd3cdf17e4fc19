"""``prepare`` as a scale-out stage (``data_io.stage.Stage``): pass 1 of each new source (read,
clean, hash, encode) as one unit, or of each range of a large text or JSONL file
(``formats.ranges``: cut at document boundaries) or run of a Parquet file's row groups; the
finalize step is ``prepare`` itself, which takes each source's pass 1 from its parts and then
de-duplicates, splits and writes the shards exactly as one run on one machine does.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Any, ClassVar

from data_io.errors import ConfigError
from data_io.formats.ranges import document_ranges, in_two_rounds
from data_io.formats.raw_text import (
    ByteRange,
    GzipPoint,
    PartsRange,
    RowGroups,
    Source,
    TextRange,
    expand_inputs,
)
from data_io.prepare.api import prepare
from data_io.prepare.identity import source_identity
from data_io.prepare.options import read_and_clean_options
from data_io.prepare.parts import write_part
from data_io.prepare.pipeline import encoder_threads
from data_io.prepare.result import PrepareResult
from data_io.prepare.run_plan import check_options, plan_run
from data_io.prepare.state import exclusive
from data_io.prepare.summary import print_summary
from data_io.prepare.tokenizers import load_tokenizer
from data_io.stage import (
    Finalized,
    Plan,
    SavedPlan,
    Unit,
    check_fields,
    check_planned_options,
    numbered,
    planned_options,
    unit_record,
)
from data_io.util.fs import sha256


class PrepareStage:
    name: ClassVar[str] = "prepare"

    def plan(self, request: dict[str, Any], *, unit_bytes: int = 0) -> Plan:
        """``request``: ``inputs``, ``output`` and ``prepare`` (``prepare``'s keyword
        arguments). One unit per source not prepared yet, or per range of about ``unit_bytes``
        of a larger text or JSONL file (a compressed one: of its text, in a few ranges) or
        Parquet file (0: whole files); largest first."""
        kwargs = planned_options(
            prepare, request.get("prepare", {}), stage="prepare", leave_out=_NOT_PLANNED
        )
        out = Path(request["output"]).expanduser().resolve()
        # Local paths absolute (units run anywhere); anything else is a Hub id.
        inputs = [str(Path(p).resolve()) if Path(p).exists() else str(p) for p in request["inputs"]]
        with exclusive(out):  # (a refusal inside leaves no folder it made behind)
            plan = plan_run(inputs, out, **kwargs)
            if plan.tok.kind == "char":
                raise ConfigError(
                    "--tokenizer char builds its vocabulary from the inputs in their order, so "
                    "its units cannot run apart: prepare without --executor"
                )
        units = []
        sources = [source for source, _ in plan.new]
        run_bytes = sum(source.size for source in sources)
        # The gzip streams' passes for entry points run together, a file a thread.
        cut = in_two_rounds(
            len(sources),
            lambda k, passes: document_ranges(
                sources[k], unit_bytes, plan.read.doc_per_line, run_bytes, passes
            ),
        )
        for source, ranges in zip(sources, cut, strict=True):
            spans = [_span(r, source.size) for r in ranges] or [({"kind": "whole"}, source.size)]
            units += [
                Unit(
                    id="",
                    task=source.name,
                    source=source.name,
                    span=span,
                    index=index,
                    count=len(spans),
                    bytes=size,
                )
                for index, (span, size) in enumerate(spans)
            ]
        units.sort(key=lambda u: (-u.bytes, u.task, u.index))
        plan.digests.wait()  # the plan records every input's content hash
        return Plan(
            stage=self.name,
            output=str(out),
            options={"inputs": inputs, "prepare": kwargs, "run": plan.options},
            units=numbered(units),
            inputs=[entry for _, entry in plan.new],
            fingerprint={"tokenizer": plan.options["tokenizer"]},
            unit_bytes=unit_bytes,
        )

    def check_options(self, options: dict[str, Any]) -> None:
        """``inputs``, ``prepare`` (``prepare``'s keyword arguments, of their types, checked
        as a run checks them) and ``run`` (what the output folder's metadata records)."""
        check_fields(options, _PLAN_FIELDS, stage=self.name)
        check_planned_options(prepare, options["prepare"], stage=self.name, leave_out=_NOT_PLANNED)
        check_options(**options["prepare"])

    def part_dir(self, plan: SavedPlan, unit: Unit) -> Path:
        """``parts/<unit id>``: pass 1 of one source (``prepare.parts``)."""
        return plan.parts_dir / unit.id

    def run_unit(self, plan: SavedPlan, unit: Unit, threads: int | None) -> dict[str, Any]:
        """Pass 1 of one source, or of one byte range of it, into its part (``prepare.parts``)."""
        kwargs = plan.options["prepare"]
        read, clean = read_and_clean_options(**kwargs)
        sources, _ = expand_inputs([unit.source], read)
        source = next((s for s in sources if s.name == unit.source), None)
        if source is None:
            raise ConfigError(f"{unit.source}: not an input any more; plan again")
        identity = _planned_identity(plan, source)
        kind = unit.span.get("kind")
        if kind in ("bytes", "text", "parts", "row_groups"):
            start, end = unit.span["start"], unit.span["end"]
            span: ByteRange | TextRange | PartsRange | RowGroups = (
                ByteRange(start, end, unit.span["first_line"])
                if kind == "bytes"
                else TextRange(start, end, unit.span["total"], _point(unit.span))
                if kind == "text"
                else PartsRange(start, end, unit.span["size"])
                if kind == "parts"
                else RowGroups(start, end, unit.span["first_row"], unit.span["total"])
            )
            # Not "named on the command line": a range without documents is no error by itself
            # (the finalize run judges the whole file).
            source = dataclasses.replace(source, span=span, explicit=False)
        tok = load_tokenizer(kwargs["tokenizer"], kwargs["eos_token"], Path(plan.output))
        if tok.fingerprint() != plan.options["run"]["tokenizer"]:
            raise ConfigError(f"{plan.path}: the tokenizer changed since the plan; plan again")
        started = time.time()
        part = self.part_dir(plan, unit)
        with encoder_threads(threads or kwargs.get("threads")):
            record = write_part(
                source,
                read,
                clean,
                tok,
                part,
                {"source": identity, "options": plan.options["run"]},
            )
        return unit_record(
            unit,
            started,
            rows=record["documents"],
            tokens=record["tokens"],
            outputs={p.name: sha256(p) for p in sorted(part.iterdir())},
        )

    def finalize(self, plan: SavedPlan, *, missing: list[Unit], progress: bool | None) -> Finalized:
        result = prepare(
            plan.options["inputs"],
            plan.output,
            parts=plan.parts_dir,
            progress=progress,
            **plan.options["prepare"],
        )
        shutil.rmtree(plan.parts_dir, ignore_errors=True)
        return Finalized(result)

    def report(self, result: PrepareResult, *, quiet: bool) -> int:
        if not quiet:
            print_summary(result)
        return 0


STAGE = PrepareStage()


def _planned_identity(plan: SavedPlan, source: Source) -> dict[str, Any]:
    """The source's identity as the plan found it (so that the units of a large file do not
    each hash all of it), checked against the file's size and time now; the finalize run
    hashes it again and uses the parts only if the content is the same."""
    entry = next((e for e in plan.inputs if e.get("name") == source.name), None)
    if entry is None:
        return source_identity(source, None)
    if entry.get("kind") == "datasets" or "size" not in entry:
        return dict(entry)
    stat = Path(source.name).stat()
    if (stat.st_size, stat.st_mtime_ns) != (entry["size"], entry["mtime_ns"]):
        raise ConfigError(
            f"{source.name}: changed since the plan was made; run the command that made the "
            "plan again (the same `data_io prepare ... --executor ...`): it plans the changed "
            "file anew and keeps the units already done (`data_io resume` runs the old plan)"
        )
    return dict(entry)


def _span(
    part: ByteRange | TextRange | PartsRange | RowGroups, size: int
) -> tuple[dict[str, Any], int]:
    """A unit's span record and its bytes (a range of a compressed text or a run of row
    groups: its share of the file on disk)."""
    if isinstance(part, ByteRange):
        span = {"kind": "bytes", "start": part.start, "end": part.end}
        return {**span, "first_line": part.first_line}, part.end - part.start
    if isinstance(part, PartsRange):
        span = {"kind": "parts", "start": part.start, "end": part.end, "size": part.size}
        return span, part.end - part.start
    if isinstance(part, TextRange):
        span = {"kind": "text", "start": part.start, "end": part.end, "total": part.total}
        if part.point is not None:
            span["point"] = part.point.record()
        return span, size * (part.end - part.start) // max(part.total, 1)
    span = {"kind": "row_groups", "start": part.start, "end": part.end}
    share = size * (part.end - part.start) // max(part.total, 1)
    return {**span, "first_row": part.first_row, "total": part.total}, share


def _point(span: dict[str, Any]) -> GzipPoint | None:
    """A text range's gzip entry point, as its span records it."""
    record = span.get("point")
    return None if record is None else GzipPoint.from_record(record)


# prepare's options a plan does not record: its units' and finalize's own business.
_NOT_PLANNED = ("progress", "parts")
# A plan's options, as ``PrepareStage.plan`` writes them.
_PLAN_FIELDS: dict[str, Any] = {"inputs": list[str], "prepare": dict, "run": dict}
