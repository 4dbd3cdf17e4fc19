"""The rich console the stages print their summaries with."""

from __future__ import annotations

from rich.console import Console


class _PipeAwareConsole(Console):
    """rich turns a closed stdout (``| head``) into ``SystemExit(1)``; raise BrokenPipeError
    instead, so that the CLI's one guard (``data_io.cli.exit_quietly_on_closed_stdout``) ends
    every command the same quiet way."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def summary_console() -> Console:
    return _PipeAwareConsole(highlight=False, soft_wrap=True)
