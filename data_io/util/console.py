"""The rich console the stages print their summaries with."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from rich.console import Console

P = ParamSpec("P")
R = TypeVar("R")


class _PipeAwareConsole(Console):
    """rich turns a closed stdout (``| head``) into ``SystemExit(1)``; raise BrokenPipeError
    instead, so that the CLI's one guard (``data_io.util.closed_stdout.exit_quietly_on_closed_stdout``) ends
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


# The environment variables by which a user sets these libraries' bars and logging: when set,
# the user's choice stands and the library is left alone.
_USER_SWITCHES = {
    "datasets": ("HF_DATASETS_DISABLE_PROGRESS_BARS", "DATASETS_VERBOSITY"),
    "huggingface_hub": ("HF_HUB_DISABLE_PROGRESS_BARS",),
}
# Undo actions of the quiet scopes now open (innermost last), and the modules each has quieted.
_OPEN_SCOPES: list[tuple[list[Callable[[], None]], set[str]]] = []


@contextlib.contextmanager
def quiet_hub_libraries(quiet: bool = True) -> Iterator[None]:
    """Inside, ``datasets`` and ``huggingface_hub`` draw no progress bars and log no info lines
    ("Generating train split", "Resolving data files"): off a terminal they only fill log files.

    Scoped: on exit every switch is put back, so a library call leaves the caller's process as
    it was (a notebook keeps its bars). A user's own ``HF_DATASETS_DISABLE_PROGRESS_BARS``,
    ``DATASETS_VERBOSITY`` or ``HF_HUB_DISABLE_PROGRESS_BARS`` stands. ``datasets`` is not
    imported here (it pulls in torch, which a cleaner does not need): code that imports it
    inside the scope calls ``quiet_newly_imported("datasets")`` right after."""
    if not quiet:
        yield
        return
    scope: tuple[list[Callable[[], None]], set[str]] = ([], set())
    _OPEN_SCOPES.append(scope)
    try:
        import huggingface_hub  # noqa: F401, PLC0415  light, and its bars show in every download

        for name in _USER_SWITCHES:
            quiet_newly_imported(name)
        yield
    finally:
        _OPEN_SCOPES.remove(scope)
        for undo in reversed(scope[0]):
            undo()


def quiet_newly_imported(name: str) -> None:
    """Quiet ``name`` (``datasets`` or ``huggingface_hub``) for the open quiet scope, if any."""
    module = sys.modules.get(name)
    if not _OPEN_SCOPES or module is None or name in _OPEN_SCOPES[-1][1]:
        return
    undos, done = _OPEN_SCOPES[-1]
    done.add(name)
    if any(variable in os.environ for variable in _USER_SWITCHES[name]):
        return
    if name == "datasets":
        bars_were_on = module.is_progress_bar_enabled()
        level = module.logging.get_verbosity()
        module.disable_progress_bars()
        module.logging.set_verbosity_error()

        def undo() -> None:
            module.logging.set_verbosity(level)
            if bars_were_on:
                module.enable_progress_bars()

        undos.append(undo)
        return
    import huggingface_hub.utils as utils  # a lazy submodule: not an attribute until imported  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

    if not utils.are_progress_bars_disabled():
        utils.disable_progress_bars()
        undos.append(utils.enable_progress_bars)


def quiet_off_terminal(function: Callable[P, R]) -> Callable[P, R]:
    """Run ``function``, which reads through ``datasets``, inside ``quiet_hub_libraries`` when
    stderr is not a terminal (``datasets`` is imported first: the function needs it anyway)."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with quiet_hub_libraries(not on_terminal()):
            import datasets  # noqa: F401, PLC0415  heavy: only when datasets is in use

            quiet_newly_imported("datasets")
            return function(*args, **kwargs)

    return wrapper


# datasets' JSON reader logs its failure as an error line and then raises it; the callers turn
# the raised error into their own message, so the logged copy is only a second, rawer one.
_JSON_READER_LOGGER = "datasets.packaged_modules.json.json"


@contextlib.contextmanager
def reader_errors_unlogged() -> Iterator[None]:
    """Inside, ``datasets``' file readers raise their errors without also logging them."""
    logger = logging.getLogger(_JSON_READER_LOGGER)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)
