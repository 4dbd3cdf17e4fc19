"""The Slurm executor: a plan's units as job arrays, and a finalize job that runs after them.

Each submission gets a folder, ``OUT/.data_io_scale/submissions/<n>/``, holding what was sent:
``units.txt`` (the unit ids, one per line, largest first), ``array.sbatch`` (one array task runs
the unit on line SLURM_ARRAY_TASK_ID + DATA_IO_UNIT_OFFSET), ``finalize.sbatch``, the tasks'
logs under ``logs/`` and ``submission.json`` (job ids, chunks). Arrays stay under the cluster's
``MaxArraySize``: more units are submitted as several arrays, each with its offset into
``units.txt``. The finalize job depends on the arrays with ``afterany``, not ``afterok``: a failed
task would leave an ``afterok`` job pending forever; finalize itself refuses when units are not
done, and ``data_io resume`` submits only those.

Slurm is only asked to run commands; what is done is read from the unit records (no ``sacct``,
which needs a database many clusters lack).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import data_io
from data_io.errors import DataIoError
from data_io.scale.manifest import Manifest, Unit
from data_io.stage import FINALIZED, THREADS_VARIABLE
from data_io.util.fs import write_json_atomic

# When ``scontrol show config`` cannot be read: Slurm's own default MaxArraySize.
DEFAULT_MAX_ARRAY_SIZE = 1001
# Seconds a single call of a Slurm client may take (a controller that hangs must not hang us).
CLIENT_TIMEOUT = 60
# Options data_io sets on the sbatch command line itself; an #SBATCH line could not change them.
RESERVED = ("array", "dependency", "export", "parsable", "wrap")
OFFSET_VARIABLE = "DATA_IO_UNIT_OFFSET"
SUBMISSIONS = "submissions"


class SlurmError(DataIoError):
    """Slurm is missing, refused a submission, or its jobs did not do what they should."""


@dataclass
class SlurmOptions:
    # ``--slurm-opt KEY=VALUE`` pairs: each becomes ``#SBATCH --KEY=VALUE`` in both scripts (an
    # empty value gives the flag ``--KEY``, a one-letter key ``-K VALUE``).
    options: dict[str, str]
    threads_per_unit: int = 1
    # Tasks per array at most + 1; None: the cluster's MaxArraySize (``scontrol show config``).
    max_array_size: int | None = None
    python: str = sys.executable


@dataclass
class Submission:
    number: int
    folder: Path
    manifest: Path
    units: int
    # One per array: {"job_id", "offset", "count"}; the array's tasks are 0..count-1.
    chunks: list[dict] = field(default_factory=list)
    finalize_job: str = ""
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    submitted: float = field(default_factory=time.time)

    @property
    def array_jobs(self) -> list[str]:
        return [chunk["job_id"] for chunk in self.chunks]

    @property
    def job_ids(self) -> list[str]:
        return [*self.array_jobs, self.finalize_job]

    def describe(self) -> str:
        if not self.chunks:
            arrays = "no units to run"
        elif len(self.chunks) == 1:
            arrays = f"{self.units} units as Slurm array job {self.chunks[0]['job_id']}"
        else:
            arrays = (
                f"{self.units} units as {len(self.chunks)} Slurm array jobs "
                f"({', '.join(self.array_jobs)}; at most {self.max_array_size - 1} tasks each)"
            )
        return f"{arrays}, then finalize job {self.finalize_job}; scripts and logs in {self.folder}"

    def save(self) -> Path:
        content = {**asdict(self), "folder": str(self.folder), "manifest": str(self.manifest)}
        path = self.folder / "submission.json"
        write_json_atomic(path, content)
        return path

    @classmethod
    def load(cls, folder: str | Path) -> Submission:
        content = json.loads((Path(folder) / "submission.json").read_text(encoding="utf-8"))
        content["folder"] = Path(content["folder"])
        content["manifest"] = Path(content["manifest"])
        return cls(**content)


def submit_slurm(manifest: Manifest, units: Sequence[Unit], options: SlurmOptions) -> Submission:
    """Submit ``units`` of the saved plan as job arrays, then the finalize job after them; the
    submission is recorded in its folder and in the plan's ``executor``."""
    assert manifest.path is not None, "save the manifest first"
    sbatch = _client("sbatch")
    _check_options(options.options)
    _refuse_if_queued(manifest)
    max_size = options.max_array_size or read_max_array_size()
    if max_size < 2:
        raise SlurmError(f"MaxArraySize {max_size} leaves no room for an array (needs 2 or more)")
    folder = _new_folder(manifest.root / SUBMISSIONS)
    (folder / "logs").mkdir()
    ordered = sorted(units, key=lambda u: -u.bytes)  # stable: the plan's order among equals
    (folder / "units.txt").write_text("".join(f"{u.id}\n" for u in ordered), encoding="utf-8")
    context = _ScriptContext(manifest.path.resolve(), folder, options, manifest.stage)
    (folder / "array.sbatch").write_text(context.array_script(), encoding="utf-8")
    (folder / "finalize.sbatch").write_text(context.finalize_script(), encoding="utf-8")

    submission = Submission(
        number=int(folder.name),
        folder=folder,
        manifest=manifest.path.resolve(),
        units=len(ordered),
        max_array_size=max_size,
    )
    per_array = max_size - 1
    try:
        for offset in range(0, len(ordered), per_array):
            count = min(per_array, len(ordered) - offset)
            job_id = _sbatch(
                sbatch,
                f"--array=0-{count - 1}",
                f"--export=ALL,{OFFSET_VARIABLE}={offset}",
                str(folder / "array.sbatch"),
            )
            submission.chunks.append({"job_id": job_id, "offset": offset, "count": count})
        after = [f"--dependency=afterany:{':'.join(submission.array_jobs)}"] if ordered else []
        submission.finalize_job = _sbatch(sbatch, *after, str(folder / "finalize.sbatch"))
    except SlurmError as error:
        # A half-made submission would run units with no finalize after them: take it back.
        _cancel(submission.array_jobs)
        if not submission.chunks:  # nothing went out: no folder that looks like a submission
            shutil.rmtree(folder, ignore_errors=True)
            raise SlurmError(
                f"{error}\nNo job went out; the scripts named above were removed with their "
                f"submission folder ({folder})"
            ) from None
        raise
    submission.save()
    manifest.executor.setdefault("slurm_submissions", []).append(
        {
            "number": submission.number,
            "folder": str(folder),
            "array_jobs": submission.array_jobs,
            "finalize_job": submission.finalize_job,
            "units": submission.units,
        }
    )
    manifest.save()
    return submission


def wait_slurm(submission: Submission, timeout: float | None = None, poll: float = 1.0) -> None:
    """Return once every job of ``submission`` has left the queue. Units that failed are the
    caller's to report (their records say why); a finalize job that ended without finalizing
    while every unit is done is an error here (its log says why)."""
    squeue = _client("squeue")
    deadline = None if timeout is None else time.monotonic() + timeout
    while queued := _queued(squeue, submission.job_ids):
        if deadline is not None and time.monotonic() > deadline:
            raise SlurmError(
                f"jobs {', '.join(sorted(queued))} of submission {submission.folder} are still "
                f"queued after {timeout:.0f} s; follow them with squeue, or "
                f"`data_io status {submission.manifest}`"
            )
        time.sleep(poll)
    manifest = Manifest.load(submission.manifest)
    if manifest.not_done() or (manifest.root / FINALIZED).exists():
        return
    log = submission.folder / "logs" / f"finalize-{submission.finalize_job}.log"
    tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else ""
    raise SlurmError(
        f"every unit is done but finalize job {submission.finalize_job} did not finalize the "
        f"output; its log {log}:\n{tail.strip() or '(empty or missing)'}\nRun `data_io scale "
        f"finalize {submission.manifest}` to finalize here"
    )


def read_max_array_size() -> int:
    """The cluster's MaxArraySize (``scontrol show config``), or Slurm's default when it
    cannot be read."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return DEFAULT_MAX_ARRAY_SIZE
    try:
        done = subprocess.run(
            [scontrol, "show", "config"], capture_output=True, text=True, timeout=CLIENT_TIMEOUT
        )
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_MAX_ARRAY_SIZE
    found = re.search(r"^MaxArraySize\s*=\s*(\d+)", done.stdout, re.MULTILINE)
    return int(found.group(1)) if done.returncode == 0 and found else DEFAULT_MAX_ARRAY_SIZE


# -- the scripts ------------------------------------------------------------------------------
@dataclass
class _ScriptContext:
    manifest: Path
    folder: Path
    options: SlurmOptions
    stage: str

    def _header(self, log: Path, suffix: str = "") -> list[str]:
        """The #SBATCH lines: data_io's defaults, then every --slurm-opt (which win; a job name
        given there is kept, with ``suffix`` for the finalize job)."""
        name = self.options.options.get("job-name") or f"data_io-{self.stage}"
        merged = {
            "output": _log_pattern(log),
            "error": _log_pattern(log),
            "cpus-per-task": str(self.options.threads_per_unit),
            **self.options.options,
            "job-name": name + suffix,
        }
        return ["#!/bin/bash", *(_sbatch_line(key, value) for key, value in merged.items())]

    def _environment(self) -> list[str]:
        """Run from the folder the plan was submitted from (a plan may name relative paths), with
        this data_io importable even when it is a checkout rather than an installed package."""

        lines = ["set -eu", f"cd {shlex.quote(os.getcwd())}"]
        package_root = Path(data_io.__file__).resolve().parents[1]
        if package_root.name not in ("site-packages", "dist-packages"):  # a checkout
            path = shlex.quote(str(package_root))
            lines.append(f'export PYTHONPATH={path}"${{PYTHONPATH:+:$PYTHONPATH}}"')
        return lines

    def array_script(self) -> str:
        threads = self.options.threads_per_unit
        lines = self._header(self.folder / "logs" / "unit-%A_%a.log")
        python = shlex.quote(self.options.python)
        lines += [
            "# One unit per array task: the line SLURM_ARRAY_TASK_ID + "
            f"{OFFSET_VARIABLE} of units.txt.",
            *self._environment(),
            # --cpus-per-task given by --slurm-opt wins over --threads-per-unit.
            f'export {THREADS_VARIABLE}="${{SLURM_CPUS_PER_TASK:-{threads}}}"',
            f'export RAYON_NUM_THREADS="${THREADS_VARIABLE}"',
            f"exec {python} -m data_io scale unit {shlex.quote(str(self.manifest))} "
            f"--list {shlex.quote(str(self.folder / 'units.txt'))}",
        ]
        return "\n".join(lines) + "\n"

    def finalize_script(self) -> str:
        lines = self._header(self.folder / "logs" / "finalize-%j.log", "-finalize")
        lines += [
            "# After the arrays, whatever their outcome: refuses (and says what to run) when "
            "units are not done.",
            *self._environment(),
            f"exec {shlex.quote(self.options.python)} -m data_io scale finalize "
            f"{shlex.quote(str(self.manifest))} -q",
        ]
        return "\n".join(lines) + "\n"


def _sbatch_line(key: str, value: str) -> str:
    # sbatch splits an #SBATCH line at blanks and ends it at a `#`, outside quotes; inside
    # them a backslash keeps the next character (a backslash before a blank does not).
    if re.search(r"""[\s#"'\\]""", value):
        value = '"' + re.sub(r'(["\\])', r"\\\1", value) + '"'
    if len(key) == 1:
        return f"#SBATCH -{key}" + (f" {value}" if value else "")
    return f"#SBATCH --{key}" + (f"={value}" if value else "")


def _log_pattern(log: Path) -> str:
    """A log's path as sbatch's --output takes it: its name's ``%A``, ``%a`` and ``%j`` are
    Slurm's, a ``%`` in its folder's path is itself (``%%``)."""
    return str(log.parent).replace("%", "%%") + "/" + log.name


def _check_options(options: dict[str, str]) -> None:
    for key, value in options.items():
        if key in RESERVED:
            raise SlurmError(
                f"--slurm-opt {key}: data_io sets --{key} itself (arrays, the finalize "
                f"dependency, the unit offset); leave it out"
            )
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", key) or "\n" in value or "\r" in value:
            raise SlurmError(
                f"--slurm-opt {key}={value!r}: expected an sbatch option name and a one-line "
                "value, e.g. partition=cpu or time=01:00:00"
            )


# -- talking to Slurm -------------------------------------------------------------------------
def _client(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise SlurmError(
            f"Slurm's {name} is not on PATH: install slurm-client or run with --executor local"
        )
    return path


def _sbatch(sbatch: str, *args: str) -> str:
    command = [sbatch, "--parsable", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"sbatch did not answer in {CLIENT_TIMEOUT} s: {shlex.join(command)}"
        ) from None
    if done.returncode != 0:
        raise SlurmError(
            f"sbatch failed (exit {done.returncode}): {shlex.join(command)}\n"
            f"{(done.stderr or done.stdout).strip()}"
        )
    # --parsable prints "ID" or "ID;cluster"; a wrapper may print sbatch's own sentence.
    job_id = done.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        said = re.search(r"Submitted batch job (\d+)", done.stdout)
        job_id = said.group(1) if said else ""
    if not job_id:
        raise SlurmError(
            f"sbatch exited 0 but printed no job id: {shlex.join(command)}\n"
            f"{(done.stdout or done.stderr).strip() or '(no output)'}\n"
            "The job may be queued all the same: check `squeue --me` (and `scancel` it if it "
            "is there) before running the command again or `data_io resume`"
        )
    return job_id


def _queued(squeue: str, job_ids: Sequence[str]) -> set[str]:
    """The jobs of ``job_ids`` still in the queue (pending, running, ending)."""
    if not job_ids:
        return set()
    command = [squeue, "-h", "-o", "%F", "-j", ",".join(job_ids)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
    except subprocess.TimeoutExpired:
        return set(job_ids)  # no answer is no proof they ended: ask again
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            if len(job_ids) == 1:
                return set()  # purged from the controller: long gone
            # One purged id fails the whole query: ask for each.
            return {j for j in job_ids if _queued(squeue, [j])}
        raise SlurmError(f"squeue failed: {shlex.join(command)}\n{done.stderr.strip()}")
    # %F is the array's job id for every task of it.
    return {line.strip() for line in done.stdout.splitlines() if line.strip()} & set(job_ids)


def _cancel(job_ids: Sequence[str]) -> None:
    scancel = shutil.which("scancel")
    if scancel and job_ids:
        subprocess.run([scancel, *job_ids], capture_output=True, timeout=CLIENT_TIMEOUT)


def _refuse_if_queued(manifest: Manifest) -> None:
    """A second submission while the previous one still runs would run its units twice (which
    is harmless, but wasteful) and finalize twice at once: refuse it."""
    squeue = shutil.which("squeue")
    if squeue is None:
        return
    for previous in sorted((manifest.root / SUBMISSIONS).glob("*/submission.json")):
        try:
            submission = Submission.load(previous.parent)
        except (OSError, ValueError, TypeError):
            continue
        if queued := _queued(squeue, submission.job_ids):
            raise SlurmError(
                f"submission {previous.parent} still has jobs in the queue "
                f"({', '.join(sorted(queued))}): wait for them, or scancel them first"
            )


def _new_folder(parent: Path) -> Path:
    """The next numbered folder (1, 2, ...); made atomically, so two submitters never share."""
    parent.mkdir(parents=True, exist_ok=True)
    numbers = [int(p.name) for p in parent.iterdir() if p.name.isdigit()]
    number = max(numbers, default=0) + 1
    while True:
        try:
            (parent / str(number)).mkdir()
        except FileExistsError:
            number += 1
            continue
        return parent / str(number)
