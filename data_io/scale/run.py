"""A scaled-out run from start to end: plan, run the units on an executor, finalize; and
``resume``, which runs only the units without a completion record.

Executors: ``local`` (worker processes here), ``ray`` (tasks on a Ray cluster) and ``slurm``
(job arrays; the finalize step is a dependent job, so ``slurm`` returns once submitted unless
asked to wait).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.scale.finalize import finalize
from data_io.scale.leftovers import remove_dead_temporaries
from data_io.scale.manifest import Manifest, Unit
from data_io.scale.plan import plan, plan_clean, plan_prepare, plan_tokenize
from data_io.scale.processes import Stopped, describe_removed, sigterm_raises
from data_io.stage import DEFAULT_UNIT_MB, FINALIZED, PLAN_AGAIN, check_option_type
from data_io.util.fs import try_flock
from data_io.util.interrupt import ReportedInterrupt

EXECUTORS = ("local", "slurm", "ray")


@dataclass
class ExecutorSettings:
    kind: str = "local"
    workers: int = 1
    threads_per_unit: int | None = None
    slurm_options: dict[str, str] = field(default_factory=dict)
    slurm_wait: bool = False
    ray_address: str | None = None
    retries: int = 2

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(ExecutorSettings)
        for setting in fields(self):  # a plan's record may have been edited
            check_option_type(
                "the executor", setting.name, getattr(self, setting.name), hints[setting.name]
            )
        if self.retries < 0:
            raise ConfigError(f"retries must be at least 0, not {self.retries}")
        if self.kind not in EXECUTORS:
            raise ConfigError(f"executor {self.kind!r} is not one of {', '.join(EXECUTORS)}")
        if self.workers < 1:
            raise ConfigError(f"workers must be at least 1, not {self.workers}")
        # At least 1 here; the most a unit can use is checked where it runs (its own cores).
        if self.threads_per_unit is not None and self.threads_per_unit < 1:
            raise ConfigError(f"threads_per_unit must be at least 1, not {self.threads_per_unit}")

    @classmethod
    def from_record(cls, record: dict[str, Any], where: object = None) -> ExecutorSettings:
        """The settings a plan recorded (its executor dict also holds what executors added,
        such as Slurm's submissions: only the settings' own fields are taken); ``where``, the
        plan's path, names it in an error."""
        names = {f.name for f in fields(cls)}
        try:
            return cls(**{k: v for k, v in record.items() if k in names})
        except ConfigError as error:
            if where is None:
                raise
            raise ConfigError(f"{where}: {error}; {PLAN_AGAIN}") from None

    def recorded(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "workers": self.workers,
            "threads_per_unit": self.threads_per_unit,
            "slurm_options": self.slurm_options,
            "ray_address": self.ray_address,
            "retries": self.retries,
        }


@dataclass
class Outcome:
    manifest: Manifest
    # Units that did not complete (their records say why); empty when all ran.
    unfinished: list[Unit]
    # The stage's finalize result (a TokenizeResult, PrepareResult...), None when it did not
    # run here.
    result: Any = None
    submitted: Any = None
    # Slurm with --wait: the jobs have ended (finalize ran as a job of its own).
    waited: bool = False
    # ``resume`` of a plan finalized already (by its finalize, or by a plain run that finished
    # its work): nothing ran.
    finalized_before: bool = False


def run_stage(
    stage: str,
    request: dict[str, Any],
    settings: ExecutorSettings,
    *,
    unit_bytes: int = DEFAULT_UNIT_MB << 20,
    progress: bool | None = None,
) -> Outcome:
    """Plan ``stage`` over ``request`` (the stage's own options), run its units on the executor
    and finalize. A plan equal to the one already saved (same options, same units) keeps its
    unit records: finished units are not run again."""
    return _start(plan(stage, request, unit_bytes), settings, progress)


def scale_tokenize(
    options: dict[str, Any],
    settings: ExecutorSettings,
    *,
    unit_mb: float = DEFAULT_UNIT_MB,
    progress: bool | None = None,
) -> Outcome:
    """``data_io tokenize`` with ``options`` (``tokenize_options``'s dict), scaled out."""
    return _start(plan_tokenize(options, int(unit_mb * (1 << 20))), settings, progress)


def scale_clean(
    names: list[str],
    settings: ExecutorSettings,
    *,
    workdir: str = ".",
    plan_dir: str | None = None,
    progress: bool | None = None,
) -> Outcome:
    """Run the cleaners ``names`` as units (one per dataset) in ``workdir``, on the executor;
    the plan lives in ``plan_dir`` (default: under the user's cache folder)."""
    return _start(plan_clean(names, workdir, plan_dir), settings, progress)


def scale_prepare(
    inputs: list[str],
    output: str,
    kwargs: dict[str, Any],
    settings: ExecutorSettings,
    *,
    progress: bool | None = None,
    unit_bytes: int = DEFAULT_UNIT_MB << 20,
) -> Outcome:
    """``prepare`` with pass 1 of each new source (or of each byte range of about
    ``unit_bytes`` of a large text or JSONL file) as a unit on the executor."""
    return _start(plan_prepare(inputs, output, kwargs, unit_bytes), settings, progress)


def resume(
    manifest: Manifest, settings: ExecutorSettings | None = None, *, progress: bool | None = None
) -> Outcome:
    """Run the plan's units that have no completion record, then finalize (nothing, when the
    plan is finalized already: its output is complete)."""
    with one_run(manifest.root):
        if (manifest.root / FINALIZED).exists():
            return Outcome(manifest, [], finalized_before=True)
        if settings is None:
            settings = ExecutorSettings.from_record(manifest.executor or {}, manifest.path)
        return execute(manifest, manifest.not_done(), settings, progress=progress)


@contextlib.contextmanager
def one_run(root: Path) -> Iterator[None]:
    """Hold the plan folder ``root`` for one command that plans, runs units and finalizes: a
    second one at once (the same command twice, or other options) would clear the first one's
    unit records under it, or finalize beside it. An advisory ``flock`` on the folder, released
    when the command ends or dies; the units' own processes do not hold it. Best effort where
    the file system has no ``flock`` (as the sample's lock on a tokenized folder): a plan on
    such a shared folder runs as it did before the lock, rather than not at all."""
    made = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY)
    try:
        if not try_flock(fd):
            if made:
                with contextlib.suppress(OSError):
                    root.rmdir()
            raise ConfigError(
                f"{root}: another data_io command is running this plan (planning, running its "
                "units or finalizing); wait for it to end, or stop it, then run again "
                "(`data_io status` shows where it stands)"
            )
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def execute(
    manifest: Manifest,
    units: list[Unit],
    settings: ExecutorSettings,
    *,
    progress: bool | None = None,
) -> Outcome:
    manifest.check_options()
    removed = remove_dead_temporaries(manifest)
    if removed:
        print(describe_removed(removed), file=sys.stderr, flush=True)
    if settings.kind == "local":
        from data_io.scale.local import run_local  # noqa: PLC0415  an executor is imported when it runs (tqdm, ray, sbatch scripts)

        left = run_local(
            manifest,
            units,
            workers=settings.workers,
            threads_per_worker=settings.threads_per_unit,
            retries=settings.retries,
            progress=progress,
        )
    elif settings.kind == "ray":
        from data_io.scale.ray_executor import run_ray  # noqa: PLC0415  an executor is imported when it runs (tqdm, ray, sbatch scripts)

        left = run_ray(
            manifest,
            units,
            address=settings.ray_address,
            threads_per_unit=settings.threads_per_unit or 1,
            max_retries=settings.retries,
            progress=progress,
        )
    else:
        from data_io.scale.slurm import SlurmOptions, submit_slurm, wait_slurm  # noqa: PLC0415  an executor is imported when it runs (tqdm, ray, sbatch scripts)

        submission = submit_slurm(
            manifest,
            units,
            SlurmOptions(
                options=settings.slurm_options, threads_per_unit=settings.threads_per_unit or 1
            ),
        )
        if not settings.slurm_wait:
            return Outcome(manifest, [], submitted=submission)
        _wait_or_say_so(manifest, submission, wait_slurm)
        manifest = Manifest.load(manifest.path or manifest.root)
        return Outcome(manifest, manifest.not_done(), submitted=submission, waited=True)
    if left:
        return Outcome(manifest, left)
    # Every unit is done (none is left): only the assembly can be cut short now.
    again = f"data_io resume {manifest.path}"
    result = finalize_or_say_so(manifest, again, len(manifest.units), progress=progress)
    return Outcome(manifest, [], result=result)


def finalize_or_say_so(
    manifest: Manifest,
    again: str,
    done: int | None = None,
    *,
    encode_missing: bool = False,
    progress: bool | None = None,
) -> Any:
    """``finalize``; stopped by Ctrl-C or SIGTERM, say that ``done`` units are done (by default
    as their records say) and that the command ``again`` finalizes, then raise
    KeyboardInterrupt (``ReportedInterrupt``) or exit 128 + the signal's number.

    The stop unwinds the stage as Ctrl-C does (it rolls back what it had written, or its next
    run does; locks go with their ``with`` blocks): SIGTERM raises where it lands, as
    KeyboardInterrupt does, and only once. Finalize waits in no ``concurrent.futures.wait``
    (where an exception raised by a signal leaves locks held: ``StopFlag``); its long calls
    into Rust stop at the exception and return."""
    try:
        with sigterm_raises(once=True):
            return finalize(manifest, encode_missing=encode_missing, progress=progress)
    except (Stopped, KeyboardInterrupt) as stop:
        how = "Ctrl-C" if isinstance(stop, KeyboardInterrupt) else str(stop).split()[-1]
        if done is None:
            done = sum(1 for state in manifest.states().values() if state == "done")
        said = f"stopped by {how} while finalizing: {done} units done; `{again}` finalizes"
        print(said, file=sys.stderr, flush=True)
        if isinstance(stop, Stopped):
            raise SystemExit(stop.exit_code) from None
        raise ReportedInterrupt.after(said, stop) from None


def _wait_or_say_so(manifest: Manifest, submission: Any, wait: Any) -> None:
    """``--wait``: wait for the jobs; stopped (SIGTERM, Ctrl-C), say that they run on and how
    to follow them (nothing runs here to stop), then exit 128 + the signal's number."""

    try:
        with sigterm_raises():
            wait(submission)
    except (Stopped, KeyboardInterrupt) as stop:
        how = "Ctrl-C" if isinstance(stop, KeyboardInterrupt) else str(stop).split()[-1]
        said = (
            f"stopped by {how} while waiting: the jobs of {submission.folder} run on (scancel "
            f"{' '.join(submission.job_ids)} stops them); follow them with `data_io status "
            f"{manifest.path}`"
        )
        print(said, file=sys.stderr, flush=True)
        if isinstance(stop, Stopped):
            raise SystemExit(stop.exit_code) from None
        raise ReportedInterrupt.after(said, stop) from None


def _start(manifest: Manifest, settings: ExecutorSettings, progress: bool | None) -> Outcome:
    """Save a new plan (keeping the unit records of an equal one) and run it."""
    with one_run(manifest.root):
        manifest.executor = settings.recorded()
        _keep_or_clear_records(manifest)
        manifest.save()
        return execute(manifest, manifest.not_done(), settings, progress=progress)


def _keep_or_clear_records(manifest: Manifest) -> None:
    """Unit records belong to the plan that made them: a new plan clears them (its parts stay,
    and units whose spans did not change reuse them), an equal plan keeps them."""
    try:
        previous = Manifest.load(manifest.root)
    except ConfigError:
        previous = None
    same = (
        previous is not None
        and previous.options == manifest.options
        and previous.units == manifest.units
    )
    if not same and manifest.units_dir.exists():
        shutil.rmtree(manifest.units_dir)
    (manifest.root / FINALIZED).unlink(missing_ok=True)
