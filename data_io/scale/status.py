"""``data_io status MANIFEST``: where a scaled-out run stands, from the unit records alone (no
scheduler is asked): units done / running / failed / pending, throughput, ETA, and the error of
each failed unit with its file and row."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from data_io.scale.manifest import SPAN_WORDS, STATES, Manifest
from data_io.stage import FINALIZED
from data_io.util.words import counted

MAX_ERRORS = 20


@dataclass
class Status:
    counts: dict[str, int]
    bytes_total: int
    bytes_done: int
    # Input bytes per second over the span of the done units' work, and the time left at it.
    throughput: float | None
    eta_seconds: float | None
    failed: list[dict[str, Any]] = field(default_factory=list)
    finalized: bool = False
    # Files the stage's finalize could not take (tokenize: a file whose rows failed there, its
    # outputs left out), from ``finalized.json``: the output is not complete while any is.
    failed_files: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.counts.get("done", 0) == sum(self.counts.values())

    @property
    def output_complete(self) -> bool:
        return self.finalized and not self.failed_files


def status(manifest: Manifest) -> Status:
    states = manifest.states()
    counts = Counter(states.values())
    done = [
        manifest.read_record(u.id, "done") or {} for u in manifest.units if states[u.id] == "done"
    ]
    bytes_done = sum(int(r.get("bytes", 0)) for r in done)
    total = sum(u.bytes for u in manifest.units)
    throughput = eta = None
    began = [r["started"] for r in done if "started" in r]
    if began and bytes_done:
        elapsed = max(r.get("ended", 0) for r in done) - min(began)
        if elapsed > 0:
            throughput = bytes_done / elapsed
            eta = (total - bytes_done) / throughput
    failed = []
    for unit in manifest.units:
        if states[unit.id] != "failed" or len(failed) >= MAX_ERRORS:
            continue
        record = manifest.read_record(unit.id, "failed")
        started = manifest.read_record(unit.id, "started") or {}
        failed.append(
            record
            or {
                "unit": unit.id,
                "task": unit.task,
                "source": unit.source,
                "span": unit.span,
                "error": f"killed: its process ({started.get('host')}, pid {started.get('pid')}) "
                "ended without a record",
                "attempt": started.get("attempt"),
            }
        )
    return Status(
        counts={state: counts.get(state, 0) for state in STATES},
        bytes_total=total,
        bytes_done=bytes_done,
        throughput=throughput,
        eta_seconds=eta,
        failed=failed,
        finalized=(manifest.root / FINALIZED).exists(),
        failed_files=_failed_files(manifest),
    )


def _failed_files(manifest: Manifest) -> list[str]:
    try:
        record = json.loads((manifest.root / FINALIZED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    files = record.get("failed_files", []) if isinstance(record, dict) else []
    return [str(f) for f in files] if isinstance(files, list) else []


def describe(manifest: Manifest, report: Status) -> str:
    counts = report.counts
    lines = [
        f"plan {manifest.path}: {manifest.stage}, {len(manifest.units)} units over "
        f"{len(manifest.inputs)} files, {report.bytes_total / 1e6:,.1f} MB",
        "units: " + ", ".join(f"{counts[s]} {s}" for s in STATES),
        f"input done: {report.bytes_done / 1e6:,.1f} of {report.bytes_total / 1e6:,.1f} MB",
    ]
    if report.throughput:
        lines.append(
            f"throughput: {report.throughput / 1e6:,.1f} MB/s{_time_left(manifest, report)}"
        )
    if report.failed_files:
        shown = ", ".join(report.failed_files[:5])
        more = f" and {len(report.failed_files) - 5} more" if len(report.failed_files) > 5 else ""
        lines.append(
            f"finalized without {counted(len(report.failed_files), 'file')} that failed there: {shown}"
            f"{more}; their outputs are missing: fix them and run the {manifest.stage} command "
            "again (it redoes only what is missing)"
        )
    elif report.finalized:
        undone = sum(counts.values()) - counts["done"]
        lines.append(
            "finalized: the output is complete"
            + (
                f" ({undone} unit{'s' if undone > 1 else ''}' work was done by the finalize "
                "step or by a run without --executor, not by the units)"
                if undone
                else ""
            )
        )
    elif report.complete:
        lines.append(f"all units done; finalize with `data_io scale finalize {manifest.path}`")
    for failure in report.failed:
        lines.append(
            f"failed {failure.get('unit')} ({failure.get('task')}, {_span_words(failure.get('span'))}, "
            f"attempt {failure.get('attempt')}): {failure.get('error')}"
        )
    if counts["failed"] > len(report.failed):
        lines.append(f"... and {counts['failed'] - len(report.failed)} more failed units")
    if report.finalized:
        pass  # nothing left to run: the output is complete
    elif 0 < counts["failed"] == len(report.failed) and all(
        f.get("kind") == "Stopped" for f in report.failed
    ):
        # Only units a stop (SIGTERM, Ctrl-C) cut short: nothing to fix.
        lines.append(f"run what is left with `data_io resume {manifest.path}`")
    elif counts["failed"]:
        hint = (
            f"fix what the failed units name, then run what is left with `data_io resume "
            f"{manifest.path}`"
        )
        if any(_span_kind(f.get("span")) != "whole" for f in report.failed):
            # Fixing a bad row changes its file: the units cut from it then refuse to run.
            hint += (
                "; a unit of part of a file (bytes, row groups, compressed parts) whose file "
                "changed since the plan says so, and then the plan must be made again: run the "
                "command that made it (it keeps the units already done)"
            )
        lines.append(hint)
    elif counts["pending"] and (submitted := _last_slurm_submission(manifest)) is not None:
        # Pending may mean queued: say which jobs, not only how to run them here.
        jobs = ", ".join([*submitted.get("array_jobs", []), str(submitted.get("finalize_job"))])
        lines.append(
            f"submitted to Slurm as job(s) {jobs} (scripts and logs in {submitted.get('folder')}): "
            f"`squeue -j {jobs.replace(', ', ',')}` shows what still waits or runs; "
            f"`data_io resume {manifest.path}` runs what is left once they are gone"
        )
    elif counts["pending"]:
        lines.append(f"run what is left with `data_io resume {manifest.path}`")
    return "\n".join(lines)


def _time_left(manifest: Manifest, report: Status) -> str:
    """What the throughput line says of the time left: an estimate only while units run, or
    may (queued Slurm jobs: no scheduler is asked); with units left and none running (a run
    stopped, units failed), that nothing runs: the last line says how to go on."""
    counts = report.counts
    if report.finalized or report.complete:
        return ""
    queued = counts["pending"] and _last_slurm_submission(manifest) is not None
    if counts["running"] or queued:
        return f", about {_duration(report.eta_seconds or 0)} left"
    return "; nothing is running now"


def _last_slurm_submission(manifest: Manifest) -> dict[str, Any] | None:
    """The plan's last Slurm submission as its record lists it, if any."""
    submissions = (manifest.executor or {}).get("slurm_submissions")
    if isinstance(submissions, list) and submissions and isinstance(submissions[-1], dict):
        return submissions[-1]
    return None


def _span_kind(span: Any) -> Any:
    return span.get("kind") if isinstance(span, dict) else span


def _span_words(span: Any) -> str:
    """A unit's span as a user reads it: ``whole file``, ``bytes 0..1048576``."""
    if not isinstance(span, dict):
        return f"span {span}"
    kind = span.get("kind")
    words = SPAN_WORDS.get(kind, f"span {kind}")
    return words if kind == "whole" else f"{words} {span.get('start')}..{span.get('end')}"


def stopped_message(manifest: Manifest, stop: BaseException) -> str:
    """What a run stopped by a signal says: ``stopped by SIGTERM: 3 units done, 5 left;
    `data_io resume PLAN` continues``."""
    how = "Ctrl-C" if isinstance(stop, KeyboardInterrupt) else str(stop).removeprefix("stopped by ")
    done = sum(1 for state in manifest.states().values() if state == "done")
    return (
        f"stopped by {how}: {done} units done, {len(manifest.units) - done} left; "
        f"`data_io resume {manifest.path}` continues"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return time.strftime("%H h %M min", time.gmtime(seconds))
