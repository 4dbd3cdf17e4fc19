"""``data_io sample`` and ``sample_tokenized.py``: the command lines of stage 4 (the same options,
as OmegaConf ``key=value`` arguments)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence

from data_io.errors import DataIoError
from data_io.sampling.config import config_help, dashed_settings_hint, parse_overrides
from data_io.sampling.pipeline import sample
from data_io.util.console import on_terminal

__all__ = ["main", "register"]

_DESCRIPTION = (
    "Build the per-epoch index arrays and the token pool that the trainer memory-maps, "
    "from a tokenized corpus and prefix_config.yaml. Options are OmegaConf key=value "
    "arguments; the Markdown analytics go to stdout, progress and notes to stderr."
)


def _epilog() -> str:
    return "configuration (key=value arguments, shown with their defaults):\n" + config_help()


def _terminate(signum: int, _frame: object) -> None:
    # SIGTERM (a job scheduler stopping the node) unwinds like Ctrl-C, so that the staging
    # folder is removed instead of holding RAM-disk space until the next run.
    raise SystemExit(128 + signum)


def _run(args: argparse.Namespace) -> int:
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
    config = parse_overrides(args.overrides)
    # Bars only where someone watches them (a log file gets none), unless asked for.
    progress = args.progress or (not args.quiet and on_terminal())
    sample(config, progress=progress)
    return 0


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value",
        help="configuration: any of the keys below (default: all defaults)",
    )  # fmt: skip
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "-q", "--quiet", action="store_true",
        help="no progress bars (default: shown when stderr is a terminal; notes and errors "
        "still go to stderr)",
    )  # fmt: skip
    shown.add_argument(
        "--progress", action="store_true",
        help="progress bars even when stderr is not a terminal (default: only on a terminal)",
    )  # fmt: skip


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``data_io sample key=value ...``."""
    parser = subparsers.add_parser(
        "sample",
        help="stratified sampling into per-epoch index arrays (sample_tokenized.py)",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(run=_run)


def main(argv: Sequence[str] | None = None) -> int:
    """``python sample_tokenized.py key=value ...``: same options as ``data_io sample``."""
    parser = argparse.ArgumentParser(
        prog="sample_tokenized.py",
        description=_DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    from data_io import __version__  # noqa: PLC0415  read only here (importlib.metadata: ~60 ms)

    # The same line as `data_io --version`, under this entry point's name.
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    # key=value arguments on either side of -q/--progress, as `data_io sample` reads them.
    args, unknown = parser.parse_known_intermixed_args(argv)
    if unknown:
        # After an unknown option argparse leaves the key=value arguments that follow unread
        # too: name only the options.
        unknown = [a for a in unknown if a.startswith("-")] or unknown
        hint = dashed_settings_hint(unknown, sys.argv[1:] if argv is None else argv)
        parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    try:
        return _run(args)
    except DataIoError as exc:
        print(f"sample_tokenized.py: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sample_tokenized.py: interrupted", file=sys.stderr)
        return 130
