"""The local executor: units on N worker processes of this machine, largest first.

Each worker is a fresh process (``spawn``: no inherited locks or thread pools) that keeps its
encoder loaded across the units it runs. A worker that dies mid-unit (killed, out of memory)
breaks the pool; the units it had not finished are run again in a new pool, up to ``retries``
times. A unit that fails with an error of the data (a bad row under ``--on-error fail``) is not
retried: it would fail again; its record says why (so does any other exception of a unit).

Workers die with this process however it ends (``prctl(PR_SET_PDEATHSIG)``, SIGKILL included),
and SIGTERM (or Ctrl-C) stops them first: the run says how many units are done and how to
resume, then exits with 128 + the signal's number. Both signals only set a flag that the wait
for the units reads (``processes.StopFlag``: an exception inside that wait leaves locks held).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from data_io.scale.manifest import Manifest, Unit
from data_io.scale.processes import (
    StopFlag,
    Stopped,
    die_with_parent,
    sigterm_sets_flag,
    stop_processes,
)
from data_io.scale.progress import UnitProgress
from data_io.scale.status import stopped_message
from data_io.scale.units import record_failure, run_unit
from data_io.stage import THREADS_VARIABLE
from data_io.util.interrupt import ReportedInterrupt


def run_local(
    manifest: Manifest,
    units: Sequence[Unit],
    *,
    workers: int = 1,
    threads_per_worker: int | None = None,
    retries: int = 2,
    progress: bool | None = None,
) -> list[Unit]:
    """Run ``units`` on ``workers`` processes; returns the units that did not complete.

    SIGTERM stops the workers, says where the run stands and raises ``SystemExit(143)``;
    Ctrl-C does the same and raises KeyboardInterrupt on (``ReportedInterrupt``: said)."""
    assert manifest.path is not None, "save the manifest first"
    workers = max(1, workers)
    threads = threads_per_worker or max(1, (os.cpu_count() or 1) // workers)
    left = list(units)
    bar = UnitProgress(left, progress)
    failed: list[Unit] = []
    try:
        with sigterm_sets_flag(ctrl_c=True) as stop:
            for _ in range(retries + 1):
                stop.check()  # a signal between pools, or before the first
                if not left:
                    break
                left = _one_pool(manifest.path, left, workers, threads, bar, failed, stop)
            stop.check()  # one that came as the last pool shut down
    except (Stopped, KeyboardInterrupt) as stop:
        bar.close()
        _record_stopped(manifest, left, stop)
        said = stopped_message(manifest, stop)
        print(said, file=sys.stderr, flush=True)
        if isinstance(stop, Stopped):
            raise SystemExit(stop.exit_code) from None
        raise ReportedInterrupt.after(said, stop) from None
    bar.close()
    return failed + left


def _record_stopped(manifest: Manifest, units: Sequence[Unit], stop: BaseException) -> None:
    """The units the stop cut short get a failed record that says so (``status`` would call
    them killed, as if a worker had died)."""
    how = "Ctrl-C" if isinstance(stop, KeyboardInterrupt) else str(stop).removeprefix("stopped by ")
    for unit in units:
        if manifest.state(unit.id) != "failed" or manifest.read_record(unit.id, "failed"):
            continue
        started = manifest.read_record(unit.id, "started") or {}
        record_failure(
            manifest,
            unit,
            f"stopped by {how} while it ran; `data_io resume` runs it again",
            "Stopped",
            str(started.get("host", socket.gethostname())),
            int(started.get("attempt", 1)),
        )


def _one_pool(
    path: Path,
    units: list[Unit],
    workers: int,
    threads: int,
    bar: UnitProgress,
    failed: list[Unit],
    stop: StopFlag,
) -> list[Unit]:
    """One pool over ``units``; the units lost to a dead worker. Failed units go to ``failed``.
    A signal is acted on between waits (``stop``), never inside one (see ``StopFlag``)."""
    context = multiprocessing.get_context("spawn")
    lost: list[Unit] = []
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(units)),
        mp_context=context,
        initializer=_start_worker,
        initargs=(threads, os.getpid()),
    )
    try:
        futures: dict[Future, Unit] = {pool.submit(run_unit, str(path), u.id): u for u in units}
        pending = set(futures)
        stop.check()
        while pending:
            finished, pending = wait(pending, timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
            stop.check()
            for future in finished:
                unit = futures[future]
                try:
                    future.result()
                except BrokenProcessPool:
                    lost.append(unit)
                    continue
                except Exception:  # recorded by the unit (its .failed record says what)
                    failed.append(unit)
                    bar.failed(unit)
                    continue
                bar.done(unit)
    except BaseException:
        # Stopped (SIGTERM, Ctrl-C) or broken here: the workers must not run on without us,
        # and shutting the pool down would wait for the units they are running.
        stop_processes(_workers(pool))
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return lost


# How often a pool's wait looks at the stop flag: a signal is answered within this.
_POLL_SECONDS = 0.1


def _workers(pool: ProcessPoolExecutor) -> list:
    """The pool's worker processes (its own table; once the pool broke, every child process
    multiprocessing started here, which are only ever this pool's workers)."""
    processes = getattr(pool, "_processes", None)
    if processes:
        return list(processes.values())
    return multiprocessing.active_children()


def _start_worker(threads: int, parent: int) -> None:
    """Each worker's first act: die with the parent (SIGKILL when it ends, however it ends),
    leave Ctrl-C to the parent, then take its thread budget.

    A terminal's Ctrl-C reaches the whole process group: a worker interrupted inside the
    pool's queue code died holding its lock, and the parent, done and exiting, then waited
    for the pool's manager thread forever. The parent stops the workers itself."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ[THREADS_VARIABLE] = str(threads)
    os.environ["RAYON_NUM_THREADS"] = str(threads)
