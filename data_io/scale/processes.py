"""Processes of a run and what they leave behind: workers that die with their parent, a parent
that stops its workers on SIGTERM, and whether the process that left a temporary is gone.

Linux only where it must be (``prctl``, ``/proc``); elsewhere the calls do nothing (the
worker outlives a killed parent there, as it always did) or answer conservatively (an owner
that cannot be checked counts as alive, so its temporary is kept).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence

from data_io.util.stale import (  # noqa: F401  (where the scale layer and its tests find them)
    Leftover,
    describe_removed,
    entry_size,
    format_bytes,
    last_written,
    owner_gone,
    pid_alive,
    process_start_time,
    remove,
)

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when its parent ends (Linux
    ``prctl(PR_SET_PDEATHSIG)``), however the parent ends, SIGKILL included. Call it first
    thing in the child. ``parent_pid``: the parent that started this process; if it has
    already gone (it died before this call), this process ends now."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), sig)


class Stopped(BaseException):
    """Raised in the main thread by SIGTERM within :func:`sigterm_raises` (a BaseException,
    like KeyboardInterrupt: no ``except Exception`` of a stage swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def sigterm_raises(*, once: bool = False) -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Stopped` in the main thread instead of ending
    the process at once, so that the caller stops its workers and says where the run stands.
    ``once``: only the first SIGTERM raises; later ones are ignored, so that a second does not
    cut short the unwinding the first began (a stage rolling back what it wrote). Only for
    code that an exception may interrupt anywhere, as Ctrl-C does (not inside
    ``concurrent.futures.wait``: see :class:`StopFlag`). Outside the main thread (no handler
    can be set there) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = False

    def handler(signum: int, _frame: object) -> None:
        nonlocal raised
        if once and raised:
            return
        raised = True
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


class StopFlag:
    """Set by SIGTERM (and Ctrl-C, when asked) within :func:`sigterm_sets_flag`; :meth:`check`
    raises :class:`Stopped` (KeyboardInterrupt for Ctrl-C) once it is. For loops that wait
    where an exception raised by a signal handler does harm: inside an extension (Ray's
    ``wait``), or inside ``concurrent.futures.wait``, which holds every future's lock while it
    sets up, so that an exception there leaves some held and the pool's own thread, then the
    interpreter's exit, waits for them forever."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def check(self) -> None:
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            raise Stopped(self.signum)


@contextlib.contextmanager
def sigterm_sets_flag(*, ctrl_c: bool = False) -> Iterator[StopFlag]:
    """Within the block, SIGTERM (and SIGINT with ``ctrl_c``) only sets the flag yielded
    (main thread only; elsewhere the flag is never set)."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, _frame: object) -> None:
        if flag.signum is None:  # the first signal says how the run stopped
            flag.signum = signum

    signums = (signal.SIGTERM, signal.SIGINT) if ctrl_c else (signal.SIGTERM,)
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield flag
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before if before is not None else signal.SIG_DFL)


def stop_processes(processes: Sequence[object], grace: float = 5.0) -> None:
    """SIGTERM each of ``processes`` (``multiprocessing.Process``-like: ``terminate``,
    ``kill``, ``join``, ``is_alive``), then SIGKILL those still alive after ``grace`` s."""
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()  # type: ignore[attr-defined]
    deadline = time.monotonic() + grace
    for process in processes:
        with contextlib.suppress(Exception):
            process.join(max(0.0, deadline - time.monotonic()))  # type: ignore[attr-defined]
    for process in processes:
        with contextlib.suppress(Exception):
            if process.is_alive():  # type: ignore[attr-defined]
                process.kill()  # type: ignore[attr-defined]
                process.join(1.0)  # type: ignore[attr-defined]
