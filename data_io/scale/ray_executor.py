"""The Ray executor: each unit is one Ray task on a cluster, progress comes back as they end.

The cluster is the one Ray is already connected to in this process, else ``address`` (or
``RAY_ADDRESS``), else a local one started here (and stopped at the end: only what this module
started is shut down). Every node must import the same data_io (install it there: the Rust
extension cannot be shipped as source) and see the output folder at the same path (a shared
file system): a unit writes its part and records there, and the driver reads them back.

Retries are Ray's: a task whose worker dies (SIGKILL, out of memory, a lost node) runs again on
another worker, up to ``max_retries`` times, and so does one that raises an unexpected
exception. An error of the data (a bad row under ``--on-error fail``: a ``DataIoError``) would
fail again: the task returns it instead of raising, so Ray does not retry it; ``run_unit``
has already written its ``.failed`` record with the file and row.

SIGTERM (or Ctrl-C) cancels the tasks, shuts down a cluster started here (its processes also
die with this one if it is killed: Ray starts them bound to it), says how many units are done
and how to resume, and exits with 128 + the signal's number.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from data_io.errors import ConfigError, DataIoError
from data_io.scale.manifest import Manifest, Unit
from data_io.scale.processes import StopFlag, Stopped, sigterm_sets_flag
from data_io.scale.progress import UnitProgress
from data_io.scale.status import stopped_message
from data_io.scale.units import record_failure, run_unit
from data_io.util.interrupt import ReportedInterrupt

# Seconds between looks at the SIGTERM flag while waiting for tasks.
_POLL_SECONDS = 0.5
INSTALL_HINT = "pip install 'data_io[scale]' (or pip install ray)"


def run_ray(
    manifest: Manifest,
    units: Sequence[Unit],
    *,
    address: str | None,
    threads_per_unit: int = 1,
    max_retries: int = 3,
    progress: bool | None = None,
) -> list[Unit]:
    """Run ``units`` as Ray tasks of ``threads_per_unit`` CPUs each; returns the units that
    did not complete (each with a ``.failed`` record saying why)."""
    assert manifest.path is not None, "save the manifest first"
    if not units:
        return []
    ray = _import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    started_here = _connect(ray, address)
    bar = UnitProgress(units, progress)
    try:
        try:
            # Set after ray.init, whose own handler would exit 15 without a word.
            with sigterm_sets_flag() as stop:
                if started_here and not address:
                    _check_cpus(ray, threads_per_unit)
                return _run(ray, manifest, list(units), threads_per_unit, max_retries, bar, stop)
        finally:
            bar.close()
            if started_here:
                ray.shutdown()
    except (Stopped, KeyboardInterrupt) as stop:
        said = stopped_message(manifest, stop)
        print(said, file=sys.stderr, flush=True)
        if isinstance(stop, Stopped):
            raise SystemExit(stop.exit_code) from None
        raise ReportedInterrupt.after(said, stop) from None


def _import_ray() -> Any:
    try:
        import ray  # noqa: PLC0415  heavy: ray, only the ray executor
    except ImportError:
        raise ConfigError(
            f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}"
        ) from None
    return ray


def _connect(ray: Any, address: str | None) -> bool:
    """Join the cluster; True when this call started Ray (so it is ours to shut down).
    ``address`` is the one given or ``RAY_ADDRESS``."""
    if ray.is_initialized():
        return False
    # A local cluster started for this run needs no dashboard (nor its extra dependencies).
    extra = {} if address else {"include_dashboard": False}
    ray.init(address=address, logging_level=logging.WARNING, **extra)
    return True


def _check_cpus(ray: Any, threads_per_unit: int) -> None:
    """On the local cluster started here, a task asking more CPUs than this machine has would
    wait forever: say so now. (A cluster joined may grow with its autoscaler: not checked.)"""
    cpus = ray.cluster_resources().get("CPU", 0)
    if threads_per_unit > cpus:
        raise ConfigError(
            f"--threads-per-unit {threads_per_unit} is more than the {cpus:g} CPUs of the local "
            "Ray cluster started here: no task could start (join a bigger one: --ray-address)"
        )


def _run(
    ray: Any,
    manifest: Manifest,
    units: list[Unit],
    threads: int,
    max_retries: int,
    bar: UnitProgress,
    stop: StopFlag | None = None,
) -> list[Unit]:
    task = ray.remote(_unit_task)
    # Absolute: a worker's working folder is not the driver's on other nodes.
    path = os.path.abspath(manifest.path)
    refs = {
        task.options(
            name=f"data_io unit {unit.id}",
            num_cpus=threads,
            max_retries=max_retries,
            retry_exceptions=True,
        ).remote(path, unit.id, threads): unit
        for unit in units
    }
    pending = list(refs)
    failed: set[str] = set()
    try:
        while pending:
            # In steps: SIGTERM is noticed between them (raised inside Ray's wait, an
            # exception would surface as a SystemError).
            ready, pending = ray.wait(pending, num_returns=1, timeout=_POLL_SECONDS)
            if stop is not None:
                stop.check()
            # With it, every other task that has ended meanwhile: progress catches up at once.
            if pending:
                more, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                ready += more
            for ref in ready:
                unit = refs[ref]
                error = _outcome(ray, manifest, unit, ref, max_retries)
                if error is None:
                    bar.done(unit)
                else:
                    failed.add(unit.id)
                    bar.failed(unit)
    except BaseException:
        # Interrupted (SIGTERM, Ctrl-C): do not leave our tasks running on a cluster we leave.
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    return [unit for unit in units if unit.id in failed]


def _outcome(ray: Any, manifest: Manifest, unit: Unit, ref: Any, max_retries: int) -> str | None:
    """None when the unit is done, else why not (recorded in its ``.failed`` record when the
    unit could not record it itself)."""
    try:
        error = ray.get(ref)
    except ray.exceptions.WorkerCrashedError as exc:
        error = (
            f"killed: its Ray worker died (killed, out of memory, or its node lost), "
            f"{max_retries} retries spent; the last: {_first_line(exc)}"
        )
    except ray.exceptions.RayError as exc:
        error = _describe(exc)
    else:
        if error is None and not manifest.record_path(unit.id, "done").exists():
            error = (
                f"its Ray task ended but its completion record is not in {manifest.units_dir}: "
                "the output folder must be on a file system every node of the cluster shares"
            )
    if error is not None:
        _record_failure(manifest, unit, error)
    return error


def _describe(exc: Exception) -> str:
    cause = getattr(exc, "cause", None)
    text = f"{type(cause).__name__}: {cause}" if cause is not None else _first_line(exc)
    if "No module named 'data_io" in str(exc):
        text += "; install data_io (the same version as here) on every node of the Ray cluster"
    return text


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _record_failure(manifest: Manifest, unit: Unit, error: str) -> None:
    """Write the unit's ``.failed`` record unless its last attempt wrote its own (a data
    error): a killed worker, or a unit that could not even start, leaves none."""
    started = manifest.read_record(unit.id, "started") or {}
    attempt = int(started.get("attempt", 0))
    own = manifest.read_record(unit.id, "failed")
    if own is not None and int(own.get("attempt", 0)) >= attempt:
        return
    host = started.get("host", socket.gethostname())
    record_failure(manifest, unit, error, "RayTaskFailed", host, attempt)


def _unit_task(manifest_path: str, unit_id: str, threads: int) -> str | None:
    """The Ray task (runs on a worker): None when the unit is done; the message of a data
    error, returned rather than raised so that Ray does not retry it."""

    try:
        run_unit(manifest_path, unit_id, threads)
    except DataIoError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
