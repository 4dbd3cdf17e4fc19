"""Command line of the scale-out: ``--executor`` and its options, which ``data_io.cli`` adds to the
commands of the stages that can be cut into units (``data_io.stage.STAGES``), and the commands ``status``, ``resume`` and ``scale`` (``scale unit``
runs one unit: what a Slurm array task calls; ``scale finalize`` assembles the output)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from data_io.errors import ConfigError
from data_io.scale.manifest import Manifest
from data_io.scale.run import (
    EXECUTORS,
    ExecutorSettings,
    Outcome,
    finalize_or_say_so,
    resume,
    run_stage,
)
from data_io.scale.status import describe, status
from data_io.scale.units import run_unit
from data_io.stage import DEFAULT_UNIT_MB, load_stage
from data_io.util.args import positive_int, positive_number


def add_executor_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    group = parser.add_argument_group("scale-out (plan, units, finalize; see docs/stages/scale.md)")
    group.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=None,
        required=required,
        help="cut the work into units and run them: on worker processes here (local), as Ray "
        "tasks (ray) or as Slurm job arrays (slurm); the output is byte-identical to a run "
        "without it (default: run in this process, no plan)",
    )
    group.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        help="local: worker processes (default: one per 4 cores, at least 1)",
    )
    group.add_argument(
        "--threads-per-unit",
        type=positive_int,
        default=None,
        help="encoder threads of each unit (default: cores / workers locally, 1 "
        "on Ray; Slurm: --cpus-per-task)",
    )
    group.add_argument(
        "--unit-mb",
        type=unit_mb,
        default=DEFAULT_UNIT_MB,
        help="input per unit; bigger files are cut (default: %(default)s)",
    )
    group.add_argument(
        "--slurm-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an #SBATCH option for every job, e.g. partition=cpu; repeatable (default: none)",
    )
    group.add_argument(
        "--wait",
        action="store_true",
        help="slurm: wait until the jobs end and print the status (default: return once submitted)",
    )
    group.add_argument(
        "--ray-address",
        default=None,
        help="ray: the cluster to join (default: RAY_ADDRESS, else a local one)",
    )


def unit_mb(text: str) -> float:
    """``--unit-mb``: a finite number of MB, one byte or more (inf, or a size that rounds to 0
    bytes, has no unit size to cut at)."""
    value = positive_number(text)
    if not math.isfinite(value) or value * (1 << 20) < 1:
        raise argparse.ArgumentTypeError(
            f"must be a finite size of at least one byte (1/1048576 MB, about 1e-06), got {text}"
        )
    return value


def settings_from(args: argparse.Namespace, kind: str) -> ExecutorSettings:
    options = {}
    for item in args.slurm_opt:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--slurm-opt {item!r}: expected KEY=VALUE, e.g. partition=cpu")
        options[key.strip().lstrip("-")] = value.strip()
    workers = args.workers or max(1, (os.cpu_count() or 1) // 4)
    return ExecutorSettings(
        kind=kind,
        workers=workers,
        threads_per_unit=args.threads_per_unit,
        slurm_options=options,
        slurm_wait=args.wait,
        ray_address=args.ray_address,
    )


_RESUME_HELP = {
    "executor": "run the missing units on worker processes here (local), as Ray tasks (ray) or "
    "as Slurm job arrays (slurm) (default: the executor the plan recorded)",
    "workers": "local: worker processes (default: the number the plan recorded)",
    "threads_per_unit": "encoder threads of each unit (default: the number the plan recorded)",
    "slurm_opt": "an #SBATCH option for every job, added to those the plan recorded, e.g. "
    "partition=cpu; repeatable (default: none)",
    "unit_mb": "refused by resume: the plan's units are cut already; to cut them anew, run the "
    "command that made the plan again with --unit-mb (default: none)",
    "ray_address": "ray: the cluster to join (default: the one the plan recorded, else "
    "RAY_ADDRESS, else a local one)",
}


def resume_settings(manifest, args: argparse.Namespace) -> ExecutorSettings:
    """The settings the plan recorded, with what this command line gives on top (its
    ``--slurm-opt`` options are added to the recorded ones)."""
    recorded = ExecutorSettings.from_record(manifest.executor or {}, manifest.path)
    given = settings_from(args, args.executor or recorded.kind)
    return ExecutorSettings(
        kind=args.executor or recorded.kind,
        workers=args.workers or recorded.workers,
        threads_per_unit=args.threads_per_unit or recorded.threads_per_unit,
        slurm_options={**recorded.slurm_options, **given.slurm_options},
        slurm_wait=args.wait,
        ray_address=args.ray_address or recorded.ray_address,
        retries=recorded.retries,
    )


def run_scaled(stage: str, request: dict, args: argparse.Namespace) -> int:
    """Run ``stage`` over ``request`` (the stage's own options) as units on the executor the
    command line chose: what ``data_io COMMAND --executor ...`` does."""
    outcome = run_stage(
        stage,
        request,
        settings_from(args, args.executor),
        unit_bytes=int(args.unit_mb * (1 << 20)),
        progress=False if args.quiet else None,
    )
    return _report(outcome, quiet=args.quiet)


def _report(outcome: Outcome, *, quiet: bool = False) -> int:
    manifest = outcome.manifest
    if outcome.submitted is not None:
        # Slurm: the finalize step is a job of its own; say what was submitted, or (after
        # --wait) where the run stands now.
        if outcome.waited:
            report = status(manifest)
            done = report.output_complete
            print(describe(manifest, report), file=sys.stdout if done else sys.stderr)
            return 0 if done else 1
        if not quiet:
            print(f"submitted: {outcome.submitted.describe()}")
            print(f"follow it with `data_io status {manifest.path}`")
        return 0
    if outcome.finalized_before:
        if not quiet:
            print(
                f"plan {manifest.path}: finalized already, the output is complete; nothing to run"
            )
        return 0
    if outcome.unfinished or outcome.result is None:
        print(describe(manifest, status(manifest)), file=sys.stderr)
        return 1
    if not quiet:
        print(f"plan {manifest.path}: {len(manifest.units)} units, all done; output finalized")
    return load_stage(manifest.stage).report(outcome.result, quiet=quiet)


_MANIFEST_HELP = (
    "the plan: OUT/.data_io_scale/manifest.json, or OUT; for `clean --executor`, the folder "
    "it ran in (its plan is under ~/.cache/data_io/scale unless --plan-dir said otherwise)"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    status_parser = subparsers.add_parser(
        "status",
        help="where a scaled-out run stands: units done/running/failed/pending, ETA, errors",
        description="Read a plan's unit records: counts, throughput, ETA, and the error (file "
        "and row) of each failed unit.",
    )
    status_parser.add_argument("manifest", help=_MANIFEST_HELP)
    status_parser.set_defaults(run=_status)

    resume_parser = subparsers.add_parser(
        "resume",
        help="run the units of a plan that have no completion record, then finalize",
        description="Run only the units without a completion record, on the executor the plan "
        "was made for unless --executor says otherwise, then finalize the output.",
    )
    resume_parser.add_argument("manifest", help=_MANIFEST_HELP)
    resume_parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress or summary (default: off)"
    )
    add_executor_arguments(resume_parser)
    # The defaults of a resume are the plan's, not those of a first run (resume_settings).
    for action in resume_parser._actions:
        if action.dest in _RESUME_HELP:
            action.help = _RESUME_HELP[action.dest]
        if action.dest == "unit_mb":
            action.default = None  # given or not: a given one is refused (_resume)
    resume_parser.set_defaults(run=_resume)

    scale_parser = subparsers.add_parser(
        "scale", help="run one unit of a plan, or finalize it (what executors call)"
    )
    commands = scale_parser.add_subparsers(dest="scale_command", required=True)
    unit = commands.add_parser("unit", help="run one unit (idempotent)")
    unit.add_argument("manifest", help=_MANIFEST_HELP)
    which = unit.add_mutually_exclusive_group(required=True)
    which.add_argument("--unit", help="the unit's id (this or --list is required)")
    which.add_argument(
        "--list",
        help="a file of unit ids, one per line; run the one at --index (this or --unit is "
        "required)",
    )
    unit.add_argument(
        "--index",
        type=int,
        default=None,
        help="line of --list (default: SLURM_ARRAY_TASK_ID + DATA_IO_UNIT_OFFSET)",
    )
    unit.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="encoder threads (default: what the executor set for its workers, else the "
        "stage's own default)",
    )
    unit.set_defaults(run=_unit)
    final = commands.add_parser("finalize", help="assemble the output from the done units")
    final.add_argument("manifest", help=_MANIFEST_HELP)
    final.add_argument(
        "--encode-missing",
        action="store_true",
        help="encode the files of units not done here instead of failing (default: off)",
    )
    final.add_argument(
        "-q", "--quiet", action="store_true", help="no progress or summary (default: off)"
    )
    final.set_defaults(run=_finalize)


def _status(args: argparse.Namespace) -> int:
    manifest = Manifest.load(args.manifest)
    report = status(manifest)
    print(describe(manifest, report))
    return 0 if report.complete and not report.failed_files else 3


def _resume(args: argparse.Namespace) -> int:
    if args.unit_mb is not None:
        # Taken and ignored, it would look like the units were cut anew.
        raise ConfigError(
            "resume runs the plan's units as they were cut; --unit-mb cannot change them. "
            "To cut the units anew, run the command that made the plan again with --unit-mb "
            "(a unit cut as before reuses its finished part)"
        )
    manifest = Manifest.load(args.manifest)
    settings = resume_settings(manifest, args)
    return _report(
        resume(manifest, settings, progress=False if args.quiet else None), quiet=args.quiet
    )


def _unit(args: argparse.Namespace) -> int:
    unit_id = args.unit
    if unit_id is None:
        index = args.index
        if index is None:
            try:
                index = int(os.environ["SLURM_ARRAY_TASK_ID"]) + int(
                    os.environ.get("DATA_IO_UNIT_OFFSET", "0")
                )
            except (KeyError, ValueError):
                raise ConfigError(
                    "--list needs --index, or SLURM_ARRAY_TASK_ID in the environment"
                ) from None
        ids = Path(args.list).read_text(encoding="utf-8").split()
        if not 0 <= index < len(ids):
            raise ConfigError(f"--index {index} is outside {args.list} ({len(ids)} units)")
        unit_id = ids[index]
    record = run_unit(args.manifest, unit_id, threads=args.threads)
    # What the stage's units count: rows everywhere, tokens where they encode (a cleaner's or
    # a tokenizer's counting unit has none: a KeyError here failed its Slurm task, done).
    counted = [
        f"{record[key]:,} {key}" for key in ("rows", "tokens") if isinstance(record.get(key), int)
    ]
    print(
        f"unit {unit_id}: {', '.join(counted) or 'done'}"
        f"{' (already done)' if record.get('reused') else ''}"
    )
    return 0


def _finalize(args: argparse.Namespace) -> int:
    manifest = Manifest.load(args.manifest)
    # What a Slurm finalize job runs: its time limit or scancel sends SIGTERM.
    again = f"data_io scale finalize {manifest.path}" + (
        " --encode-missing" if args.encode_missing else ""
    )
    result = finalize_or_say_so(
        manifest,
        again,
        encode_missing=args.encode_missing,
        progress=False if args.quiet else None,
    )
    return _report(Outcome(manifest, [], result=result), quiet=args.quiet)
