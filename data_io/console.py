"""The rich console the stages print their summaries with."""

from __future__ import annotations

import sys

from rich.console import Console


class _PipeAwareConsole(Console):
    """rich turns a closed stdout (``| head``) into ``SystemExit(1)``; raise BrokenPipeError
    instead, so that the CLI's one guard (``data_io.cli.exit_quietly_on_closed_stdout``) ends
    every command the same quiet way."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def summary_console() -> Console:
    return _PipeAwareConsole(highlight=False, soft_wrap=True)


def on_terminal() -> bool:
    """Whether progress may be drawn: stderr is a terminal (not a log file, a pipe or CI)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def quiet_datasets_off_terminal() -> None:
    """``datasets`` draws its own progress bars and logs "Generating split..." lines: off a
    terminal they only fill log files, so they are turned off (on a terminal, left as they are).
    Called where a stage first imports ``datasets``."""
    if on_terminal():
        return
    import datasets

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
