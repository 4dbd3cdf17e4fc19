"""Running one unit of a plan: what every executor calls, on whatever machine it lands.

A unit is idempotent: it writes only its own part (under a temporary name, renamed when
complete) and its records; run twice, or by two workers at once, it leaves one part. A unit
killed midway leaves a hidden temporary folder that no reader takes for a part (``finalize``
deletes the parts folder with it once the output is complete), and a ``started`` record whose
process is gone (``status`` shows it as failed: killed).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.scale.manifest import Manifest, Unit

# Set by executors that run several units per process with their own thread budget.
THREADS_VARIABLE = "DATA_IO_UNIT_THREADS"


def run_unit(manifest: Manifest | str | Path, unit_id: str, threads: int | None = None) -> dict:
    """Run unit ``unit_id`` of the plan (a no-op when its part is done and current); returns
    its completion record. A failure is recorded (``<id>.failed``: the error with its file and
    row) and raised."""
    if not isinstance(manifest, Manifest):
        manifest = Manifest.load(manifest)
    unit = manifest.unit(unit_id)
    done = manifest.read_record(unit.id, "done")
    if done is not None and _part_dir(manifest, unit).is_dir():
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
    if manifest.stage == "clean":
        return _run_cleaner(manifest, unit)
    if manifest.stage == "prepare":
        return _run_prepare_unit(manifest, unit, threads)
    if manifest.stage != "tokenize":
        raise ConfigError(f"{manifest.path}: stage {manifest.stage!r} has no units to run here")
    from data_io import _core

    if threads is None and os.environ.get(THREADS_VARIABLE):
        threads = int(os.environ[THREADS_VARIABLE])
    options = {**manifest.options, "threads": threads, "progress": False, "parts": None}
    spec = {
        "task": unit.task,
        "source": unit.source,
        "span": unit.span,
        "index": unit.index,
        "count": unit.count,
        "part_dir": str(_part_dir(manifest, unit)),
    }
    started = time.time()
    report = json.loads(_core.tokenize_unit(json.dumps(options), json.dumps(spec)))
    part = report["part"]
    return {
        "unit": unit.id,
        "task": unit.task,
        "bytes": unit.bytes,
        "rows": part["rows"],
        "tokens": part["tokens"],
        "bad_rows": part["bad_rows"],
        "outputs": part["arrays"],
        "reused": report["reused"],
        "seconds": report["seconds"],
        "started": started,
        "ended": time.time(),
        "host": socket.gethostname(),
        "encoder": part["encoder"],
    }


def _part_dir(manifest: Manifest, unit: Unit) -> Path:
    return manifest.parts_dir / unit.task / f"{unit.index:06d}"


def _run_cleaner(manifest: Manifest, unit: Unit) -> dict[str, Any]:
    """One dataset's cleaner, in the plan's working folder (its sources and outputs are
    relative to it). The cleaner commits its outputs whole (temporary names, then renames)."""
    from contextlib import chdir

    from data_io.cleaning import run_cleaner
    from data_io.cleaning.registry import find

    entry = find(unit.task)
    assert entry.cleaner is not None
    started = time.time()
    with chdir(manifest.output):
        report = run_cleaner(entry.cleaner, progress=False)
        outputs = {str(path): _sha256(Path(path)) for path, _ in report.files}
    return {
        "unit": unit.id,
        "task": unit.task,
        "bytes": unit.bytes,
        "rows": report.rows_written,
        "records": report.records,
        "outputs": outputs,
        "reused": False,
        "seconds": time.time() - started,
        "started": started,
        "ended": time.time(),
        "host": socket.gethostname(),
    }


def _sha256(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _run_prepare_unit(manifest: Manifest, unit: Unit, threads: int | None) -> dict[str, Any]:
    """Pass 1 of one source into its part (``prepare.parts``)."""
    from data_io.prepare.api import _identity, read_and_clean_options
    from data_io.prepare.inputs import expand_inputs
    from data_io.prepare.parts import write_part
    from data_io.prepare.pipeline import encoder_threads
    from data_io.prepare.tokenizers import load_tokenizer

    kwargs = manifest.options["prepare"]
    read, clean = read_and_clean_options(**kwargs)
    sources, _ = expand_inputs([unit.source], read)
    source = next((s for s in sources if s.name == unit.source), None)
    if source is None:
        raise ConfigError(f"{unit.source}: not an input any more; plan again")
    tok = load_tokenizer(kwargs["tokenizer"], kwargs["eos_token"], Path(manifest.output))
    if tok.fingerprint() != manifest.options["run"]["tokenizer"]:
        raise ConfigError(f"{manifest.path}: the tokenizer changed since the plan; plan again")
    started = time.time()
    with encoder_threads(threads or kwargs.get("threads")):
        record = write_part(
            source,
            read,
            clean,
            tok,
            manifest.parts_dir / unit.id,
            {"source": _identity(source, None), "options": manifest.options["run"]},
        )
    part = manifest.parts_dir / unit.id
    return {
        "unit": unit.id,
        "task": unit.task,
        "bytes": unit.bytes,
        "rows": record["documents"],
        "tokens": record["tokens"],
        "outputs": {p.name: _sha256(p) for p in sorted(part.iterdir())},
        "reused": False,
        "seconds": time.time() - started,
        "started": started,
        "ended": time.time(),
        "host": socket.gethostname(),
    }
