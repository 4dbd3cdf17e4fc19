"""Ending quietly when the reader of stdout goes away (``data_io ... | head``): every entry point
(``data_io``, ``python -m pipe.clean_*``, ``sample_tokenized.py``) runs its command through
:func:`exit_quietly_on_closed_stdout`. Standard library only: the CLI imports it before
anything else."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

# What a shell reports for a process killed by SIGPIPE (128 + 13): `yes | head` exits so.
EXIT_CLOSED_STDOUT = 141


def exit_quietly_on_closed_stdout(command: Callable[[], int]) -> int:
    """Run ``command``; when the reader of stdout has gone (``| head``), exit 141 silently.

    Without this, Python prints a BrokenPipeError traceback, and a second one when it flushes
    stdout at exit. stdout is flushed here, so a closed pipe surfaces inside the guard (also
    after ``--help``, which exits through SystemExit), then pointed at /dev/null so that the
    interpreter's own final flush has nowhere to fail.
    """
    try:
        try:
            return command()
        finally:
            sys.stdout.flush()
    except Exception as exc:
        if not from_closed_stdout(exc):
            raise
        _discard_stdout()
        return EXIT_CLOSED_STDOUT


def from_closed_stdout(exc: BaseException) -> bool:
    """True when ``exc`` is, or was raised while handling, a write to a closed pipe."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BrokenPipeError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _discard_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        # stdout is not a real file (a test's capture, a closed stream): nothing to redirect.
        pass
