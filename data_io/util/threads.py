"""The thread counts a user may ask of a stage: one check, one message, for every stage.

More threads than cores never speeds up the CPU-bound work the stages do, and tens of thousands
of them (a typo, a count meant for another option) start and schedule for minutes before any
work is done, so a count is capped at a few threads a core of this machine.
"""

from __future__ import annotations

import os

from data_io.errors import ConfigError

THREADS_PER_CORE = 4
# However few cores this machine has (a login node planning a run for larger ones).
MOST_THREADS_FLOOR = 64


def cores() -> int:
    """The cores this process may run on (its affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def most_threads() -> int:
    return max(MOST_THREADS_FLOOR, THREADS_PER_CORE * cores())


def checked_threads(threads: object) -> int | None:
    """``threads`` when it is None (every core) or an integer from 1 to ``most_threads()``."""
    if threads is None:
        return None
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"threads must be an integer >= 1, got {threads!r}")
    most = most_threads()
    if threads > most:
        raise ConfigError(
            f"threads={threads} is more than this machine can use ({THREADS_PER_CORE} a core of "
            f"its {cores()}, at least {MOST_THREADS_FLOOR}): pass at most {most}, or leave it "
            "unset for one a core"
        )
    return threads
