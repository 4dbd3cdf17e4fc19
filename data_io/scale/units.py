"""Running one unit of a plan: what every executor calls, on whatever machine it lands.

A unit is idempotent: it writes only its own part (under a temporary name, renamed when
complete) and its records; run twice, or by two workers at once, it leaves one part. A unit
killed midway leaves a hidden temporary folder that no reader takes for a part (``finalize``
deletes the parts folder with it once the output is complete), and a ``started`` record whose
process is gone (``status`` shows it as failed: killed).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

from data_io.scale.manifest import Manifest, Unit
from data_io.stage import load_stage


def run_unit(manifest: Manifest | str | Path, unit_id: str, threads: int | None = None) -> dict:
    """Run unit ``unit_id`` of the plan (a no-op when its part is done and current); returns
    its completion record. A failure is recorded (``<id>.failed``: the error with its file and
    row) and raised."""
    if not isinstance(manifest, Manifest):
        manifest = Manifest.load(manifest)
    unit = manifest.unit(unit_id)
    done = manifest.read_record(unit.id, "done")
    if done is not None and _part_done(manifest, unit):
        return done
    started = manifest.read_record(unit.id, "started") or {}
    attempt = int(started.get("attempt", 0)) + 1
    manifest.write_record(
        unit.id,
        "started",
        {
            "unit": unit.id,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "attempt": attempt,
            "time": time.time(),
        },
    )
    try:
        record = _run(manifest, unit, threads)
    except Exception as exc:  # recorded whatever it is; a bug shows in `status` with its type
        record_failure(manifest, unit, str(exc), type(exc).__name__, socket.gethostname(), attempt)
        raise
    record["attempt"] = attempt
    manifest.write_record(unit.id, "done", record)
    return record


def record_failure(
    manifest: Manifest, unit: Unit, error: str, kind: str, host: str, attempt: int
) -> None:
    """Write the unit's ``.failed`` record: what ``status`` shows of it."""
    manifest.write_record(
        unit.id,
        "failed",
        {
            "unit": unit.id,
            "task": unit.task,
            "source": unit.source,
            "span": unit.span,
            "error": error,
            "kind": kind,
            "host": host,
            "attempt": attempt,
            "time": time.time(),
        },
    )


def _run(manifest: Manifest, unit: Unit, threads: int | None) -> dict[str, Any]:
    return load_stage(manifest.stage).run_unit(manifest, unit, threads)


def _part_done(manifest: Manifest, unit: Unit) -> bool:
    """Whether the unit's part is there (a stage whose units leave no part runs them again)."""
    part = load_stage(manifest.stage).part_dir(manifest, unit)
    return part is not None and part.is_dir()
