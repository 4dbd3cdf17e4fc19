"""Cutting a stage's work into units, deterministically: the same inputs and options give the
same plan on any machine.

For ``prepare``: one unit per new source (a file, or a Hub dataset): pass 1 of that source
(read, clean, hash, encode); the finalize run de-duplicates, splits and writes the shards.

For ``clean``: one unit per cleaner (a dataset's source is read by its cleaner as a whole).

For ``tokenize``: the files a run would (re-)tokenize (the core's own incremental check), each
one unit when small; a big plain JSONL file is cut into byte ranges that start at line starts,
a big Parquet file into ranges of row groups (compressed JSONL cannot be entered mid-stream and
stays whole). Units are listed largest first, so that workers taking them in order finish
together.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError, InputError
from data_io.scale.manifest import Manifest, Unit, default_clean_plan_dir

DEFAULT_UNIT_MB = 256


def plan_tokenize(options: dict[str, Any], unit_bytes: int = DEFAULT_UNIT_MB << 20) -> Manifest:
    """The plan of ``data_io tokenize`` with ``options`` (``tokenize_options``'s dict): units
    of about ``unit_bytes`` of input each."""
    from data_io import _core

    if unit_bytes < 1:
        raise ConfigError(f"the unit size must be positive, not {unit_bytes} bytes")
    # Absolute paths: units, finalize and `resume` may run from any folder or node.
    options = {
        **options,
        "inputs": [str(Path(p).resolve()) for p in options["inputs"]],
        "output": str(Path(options["output"]).resolve()),
        "tokenizer_path": str(Path(options["tokenizer_path"]).resolve()),
        "progress": False,
        "parts": None,
    }
    stale = json.loads(_core.tokenize_stale(json.dumps(options)))
    units: list[Unit] = []
    inputs = []
    for task in stale:
        source = Path(task["source"])
        stat = source.stat()
        inputs.append(
            {
                "task": task["task"],
                "source": task["source"],
                "size": stat.st_size,
                "mtime_ns": stat.st_mtime_ns,
                "reason": task["reason"],
            }
        )
        spans = _spans(source, stat.st_size, unit_bytes)
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
    units = [Unit(**{**u.__dict__, "id": f"u{k:06d}"}) for k, u in enumerate(units)]
    return Manifest(
        stage="tokenize",
        output=options["output"],
        options=options,
        units=units,
        inputs=inputs,
        fingerprint=_fingerprint(options),
        unit_bytes=unit_bytes,
    )


def _fingerprint(options: dict[str, Any]) -> dict[str, Any]:
    from data_io.prepare.state import file_sha256

    tokenizer = Path(options["tokenizer_path"])
    return {"tokenizer": str(tokenizer), "tokenizer_sha256": file_sha256(tokenizer)}


def _spans(source: Path, size: int, unit_bytes: int) -> list[tuple[dict[str, Any], int]]:
    """(span, bytes) of each unit of one file, in file order."""
    name = source.name.lower()
    if size > unit_bytes and name.endswith(".jsonl"):
        return _line_ranges(source, size, unit_bytes)
    if size > unit_bytes and name.endswith(".parquet"):
        return _row_group_ranges(source, unit_bytes)
    return [({"kind": "whole"}, size)]


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
    import pyarrow.parquet as pq

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


def plan_clean(
    names: list[str], workdir: str | Path = ".", plan_dir: str | Path | None = None
) -> Manifest:
    """The plan of ``data_io clean NAMES`` run in ``workdir`` (where the cleaners' sources and
    outputs lie, relative to it): one unit per cleaner, largest source first. The plan lives
    in ``plan_dir`` (default: :func:`default_clean_plan_dir`, not the working folder)."""
    from contextlib import chdir

    from data_io.cleaning.registry import find

    workdir = Path(workdir).resolve()
    units = []
    with chdir(workdir):
        for name in names:
            entry = find(name)
            if entry.cleaner is None:
                raise ConfigError(f"cleaner {entry.name} is not written yet")
            source = Path(entry.cleaner.source.default)
            units.append(
                Unit(
                    id="",
                    task=entry.name,
                    source=str(source),
                    span={"kind": "whole"},
                    index=0,
                    count=1,
                    bytes=_size(source),
                )
            )
    units.sort(key=lambda u: (-u.bytes, u.task))
    units = [Unit(**{**u.__dict__, "id": f"u{k:06d}"}) for k, u in enumerate(units)]
    return Manifest(
        stage="clean",
        output=str(workdir),
        options={"names": [u.task for u in units]},
        units=units,
        inputs=[{"task": u.task, "source": u.source, "size": u.bytes} for u in units],
        fingerprint={},
        unit_bytes=0,
        scale_root=str(
            Path(plan_dir).resolve() if plan_dir is not None else default_clean_plan_dir(workdir)
        ),
    )


def _size(path: Path) -> int:
    """Bytes of a file, or of the files under a folder (0 when absent: the Hub streams it)."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def plan_prepare(inputs: list[str], output: str | Path, kwargs: dict[str, Any]) -> Manifest:
    """The plan of ``data_io prepare INPUTS -o OUTPUT`` with ``prepare``'s keyword arguments
    ``kwargs``: one unit per source not prepared yet, largest first."""
    import inspect

    from data_io.prepare.api import plan_run, prepare
    from data_io.prepare.state import exclusive

    # Every option recorded, defaults included: units and finalize read them from the plan.
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(prepare).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("progress", "parts")
    }
    unknown = sorted(set(kwargs) - set(defaults))
    if unknown:
        raise ConfigError(f"prepare has no option {', '.join(unknown)}")
    kwargs = {**defaults, **kwargs}
    out = Path(output).expanduser().resolve()
    # Local paths absolute (units run anywhere); anything else is a Hub id.
    inputs = [str(Path(p).resolve()) if Path(p).exists() else str(p) for p in inputs]
    with exclusive(out):
        plan = plan_run(inputs, out, **kwargs)
    if plan.tok.kind == "char":
        raise ConfigError(
            "--tokenizer char builds its vocabulary from the inputs in their order, so its units "
            "cannot run apart: prepare without --executor"
        )
    units = [
        Unit(
            id="",
            task=source.name,
            source=source.name,
            span={"kind": "whole"},
            index=0,
            count=1,
            bytes=source.size,
        )
        for source, _ in plan.new
    ]
    units.sort(key=lambda u: (-u.bytes, u.task))
    units = [Unit(**{**u.__dict__, "id": f"u{k:06d}"}) for k, u in enumerate(units)]
    return Manifest(
        stage="prepare",
        output=str(out),
        options={"inputs": inputs, "prepare": kwargs, "run": plan.options},
        units=units,
        inputs=[entry for _, entry in plan.new],
        fingerprint={"tokenizer": plan.options["tokenizer"]},
        unit_bytes=0,
    )
