"""Ctrl-C while an entry point is still importing its modules: the short message and exit
status 130 that a Ctrl-C later in the run gives, not a traceback of the import machinery.

``python -m pipe.clean_x`` imports pyarrow, polars and the cleaning stage (~0.7 s) at the top
of the cleaner module, before ``Cleaner.main`` and its handler run; the packages ``pipe`` and
``pipe_clustered`` call :func:`quiet_while_starting` while ``python -m`` locates the module
(it imports the parent packages with ``sys.argv[0] == "-m"``, as the Python docs state; never
so when ``data_io clean`` or a test imports them).
Standard library only: it runs before anything heavy is imported."""

from __future__ import annotations

import contextlib
import os
import sys
from types import TracebackType
from typing import Any

# The exit status of a run stopped by Ctrl-C (128 + SIGINT), as the shell gives it.
INTERRUPTED = 130


class ReportedInterrupt(KeyboardInterrupt):
    """A Ctrl-C whose run has said already where it stopped and how to go on (a scaled-out
    run: ``stopped by Ctrl-C: 3 units done, 5 left; ...``); its message is what it said. The
    command line exits 130 without adding its own "interrupted". A KeyboardInterrupt still,
    for the callers of the API."""

    @classmethod
    def after(cls, said: str, interrupt: BaseException) -> ReportedInterrupt:
        """The one to raise for ``interrupt`` once ``said`` is printed (its traceback kept)."""
        return cls(said).with_traceback(interrupt.__traceback__)


# (the hook installed, the one it replaced) while the start is quiet; see :func:`started`.
_INSTALLED: tuple[Any, Any] | None = None


def quiet_while_starting(prog: str) -> None:
    """From now on, a KeyboardInterrupt that nothing catches (one raised during the imports)
    prints ``<prog>: interrupted while starting; nothing was written`` and exits 130; any
    other uncaught exception is shown as before. Until :func:`started`, which the entry point
    calls once its modules are imported: a Ctrl-C later (after a cleaner committed its output,
    while its summary prints) is not one "while starting", and something may have been written."""
    global _INSTALLED
    previous = sys.excepthook

    def hook(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            previous(kind, exc, tb)
            return
        print(f"{prog}: interrupted while starting; nothing was written", file=sys.stderr)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing to flush to
                stream.flush()
        # Python would end by killing itself with SIGINT (status -2 to a parent process); a
        # Ctrl-C later in the run exits 130, and so does this one.
        os._exit(INTERRUPTED)

    sys.excepthook = hook
    _INSTALLED = (hook, previous)


def started() -> None:
    """The start is over (the entry point runs): put back the hook :func:`quiet_while_starting`
    replaced, if it is still the one installed."""
    global _INSTALLED
    if _INSTALLED is not None:
        hook, previous = _INSTALLED
        if sys.excepthook is hook:
            sys.excepthook = previous
        _INSTALLED = None
