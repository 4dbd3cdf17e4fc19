"""Temporaries of dead processes: whose they are, how big, and their removal (no stage here).

Every output is written under a temporary name and renamed when complete; a process killed
midway leaves the temporary behind. A stage's next run removes those whose owner is provably
gone (``owner_gone``: no process has that pid, or the one that has it started after the
temporary was last written) and says so in one line (``describe_removed``). Linux ``/proc``
where it must; elsewhere an owner that cannot be checked counts as alive, so nothing is lost.

A temporary's name carries its owner as ``<pid>@<host tag>`` (``owner_token``): on a folder
shared by several machines (a cluster's file system), a pid says nothing about a process of
another machine, so another machine's temporaries are kept. Names without the tag (written
before it existed) are judged as this machine's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Seconds of slack when comparing a process's start time (clock ticks, boot time in whole
# seconds) with a file's modification time.
_CLOCK_SLACK = 2.0


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


def host_tag() -> str:
    """This machine in temporaries' names: 8 hex digits of its host name's hash (a host name
    may hold dots and dashes, which the names' patterns use)."""
    return hashlib.blake2s(socket.gethostname().encode(), digest_size=4).hexdigest()


def owner_token() -> str:
    """This process in a temporary's name: ``<pid>@<host tag>`` (see ``OWNER_PATTERN``)."""
    return f"{os.getpid()}@{host_tag()}"


# ``owner_token`` in a name, for a regex: group 1 the pid, group 2 the host tag (None in a
# name written before the tag existed, taken as this machine's).
OWNER_PATTERN = r"(\d+)(?:@([0-9a-f]{8}))?"


def owner_gone(pid: int, last_written: float, host: str | None = None) -> bool:
    """Whether the process ``pid`` that last wrote a temporary at ``last_written`` (its
    modification time) has ended: no process has that pid any more, or the one that has it
    now started after that write (the pid was reused). This process is never gone, nor one of
    another machine (``host``: the tag in the temporary's name; its pid cannot be checked here)."""
    if host is not None and host != host_tag():
        return False
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


def temporary_prefix(name: str) -> str:
    """The name prefix of a temporary sibling of ``name`` made by this process: the owner in it
    lets a later run tell whether its owner is gone (``remove_dead_siblings``)."""
    return f".{name}.tmp-{owner_token()}-"


def remove_dead_siblings(folder: Path, name: str, what: str) -> list[Leftover]:
    """Remove the temporaries ``temporary_prefix(name)`` made in ``folder`` by processes that
    are gone, saying so on stderr in one line; the ones removed."""
    pattern = re.compile(rf"\.{re.escape(name)}\.tmp-{OWNER_PATTERN}-.*")
    found = []
    try:
        entries = sorted(folder.iterdir()) if folder.is_dir() else []
    except OSError:
        return []
    for path in entries:
        match = pattern.fullmatch(path.name)
        if match and owner_gone(int(match[1]), last_written(path), match[2]):
            found.append(Leftover(path, int(match[1]), entry_size(path), path.is_dir()))
    for item in found:
        remove(item.path)
    if found:
        print(describe_removed(found, what), file=sys.stderr)
    return found
