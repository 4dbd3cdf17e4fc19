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
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

# <linux/prctl.h>
PR_SET_PDEATHSIG = 1
# Seconds of slack when comparing a process's start time (clock ticks, boot time in whole
# seconds) with a file's modification time.
_CLOCK_SLACK = 2.0


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
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Stopped` in the main thread instead of ending
    the process at once, so that the caller stops its workers and says where the run stands.
    Outside the main thread (no handler can be set there) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


class StopFlag:
    """Set by SIGTERM within :func:`sigterm_sets_flag`; :meth:`check` raises :class:`Stopped`
    once it is. For loops that wait inside an extension (Ray's ``wait``) that cannot take an
    exception raised by a signal handler."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def check(self) -> None:
        if self.signum is not None:
            raise Stopped(self.signum)


@contextlib.contextmanager
def sigterm_sets_flag() -> Iterator[StopFlag]:
    """Within the block, SIGTERM only sets the flag yielded (main thread only; elsewhere
    the flag is never set)."""
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def handler(signum: int, _frame: object) -> None:
        flag.signum = signum

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


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


# -- owners of temporaries ----------------------------------------------------------------------
def _boot_time() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch, to about a second), from
    ``/proc``; None when it cannot be read (no such process, no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    try:
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[19])  # field 22 of the whole line: starttime
    except (ValueError, IndexError):
        return None
    boot = _boot_time()
    if boot is None:
        return None
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def owner_gone(pid: int, last_written: float) -> bool:
    """Whether the process ``pid`` that last wrote a temporary at ``last_written`` (its
    modification time) has ended: no process has that pid any more, or the one that has it
    now started after that write (the pid was reused). This process is never gone."""
    if pid == os.getpid():
        return False
    if not pid_alive(pid):
        return True
    started = process_start_time(pid)
    return started is not None and started > last_written + _CLOCK_SLACK


@dataclass(frozen=True)
class Leftover:
    """A temporary whose owner is gone: where, whose, how big."""

    path: Path
    pid: int
    size: int
    folder: bool = True


def entry_size(path: Path) -> int:
    """Bytes of a file, or of the files under a folder; a link counts as nothing (it is
    removed, never followed)."""
    try:
        if path.is_symlink() or not path.is_dir():
            return 0 if path.is_symlink() else path.stat().st_size
        total = 0
        for root, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_size
        return total
    except OSError:
        return 0


def last_written(path: Path) -> float:
    """The modification time of ``path`` itself (a link's own, not its target's)."""
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return time.time()


def remove(path: Path) -> None:
    """Remove a leftover whatever it is: a link is unlinked (never followed), a folder
    deleted. Best effort: one that cannot go is found again by the next run."""
    try:
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)
        else:
            shutil.rmtree(path, ignore_errors=True)
    except OSError:
        pass


def format_bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return "1 byte" if count == 1 else f"{count} bytes"


def describe_removed(leftovers: Sequence[Leftover], what: str = "temporary") -> str:
    """``removed 1 temporary folder left by a killed run (pid 1234, 512.0 MiB): PATH``."""
    kinds = {item.folder for item in leftovers}
    noun = "folder" if kinds == {True} else "file" if kinds == {False} else "entry"
    if len(leftovers) > 1:
        noun = "entries" if noun == "entry" else noun + "s"
    pids = sorted({item.pid for item in leftovers})
    size = format_bytes(sum(item.size for item in leftovers))
    runs = "a killed run" if len(pids) == 1 else "killed runs"
    pid_text = f"pid {pids[0]}" if len(pids) == 1 else "pids " + ", ".join(map(str, pids[:8]))
    if len(pids) > 8:
        pid_text += f" and {len(pids) - 8} more"
    if len(leftovers) == 1:
        where = f": {leftovers[0].path}"
    else:
        where = f" in {os.path.commonpath([str(item.path.parent) for item in leftovers])}"
    return f"removed {len(leftovers)} {what} {noun} left by {runs} ({pid_text}, {size}){where}"
