"""``data_io tokenize``: the command line of stage 3."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from data_io.tokenize.api import parse_conditions, tokenize, tokenize_options
from data_io.tokenize.options import (
    DEFAULT_BATCH_ROWS,
    DEFAULT_BOQ,
    DEFAULT_CONDITIONS,
    DEFAULT_EOA,
    DEFAULT_EOQ,
    DEFAULT_TOKENIZER,
)
from data_io.tokenize.result import MAX_LISTED, TokenizeResult
from data_io.tokenize.summary import print_summary
from data_io.util.args import ROW_FILES, add_rows_and_output
from data_io.util.interrupt import ReportedInterrupt
from data_io.util.words import counted


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenize",
        help="tokenize cleaned rows into per-file token arrays (incremental)",
        description=f"Tokenize every {ROW_FILES} under DIR... into OUT/<task>/*.npy. Other "
        "files are listed as skipped; task folders of other inputs are kept unless their source "
        "file is gone.",
    )
    add_rows_and_output(
        parser, metavar="OUT", output_help="output folder, outside every input folder"
    )
    parser.add_argument(
        "--tokenizer-path",
        default=DEFAULT_TOKENIZER,
        help="tokenizer.json, a folder holding one, or a Hub id (default: %(default)s)",
    )
    parser.add_argument(
        "--boq", default=DEFAULT_BOQ, help="begin-of-question token (default: %(default)s)"
    )
    parser.add_argument(
        "--eoq", default=DEFAULT_EOQ, help="end-of-question token (default: %(default)s)"
    )
    parser.add_argument(
        "--eoa", default=DEFAULT_EOA, help="end-of-answer token (default: %(default)s)"
    )
    parser.add_argument(
        "--conditions",
        default=",".join(f"{k}={v}" for k, v in DEFAULT_CONDITIONS.items()),
        help="condition tag to token map, TAG=TOKEN,... (default: %(default)s)",
    )
    parser.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        default="fail",
        help="a bad row fails its file (the run exits non-zero), or is skipped and counted "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="worker threads (default: every core)"
    )
    parser.add_argument(
        "--token-dtype",
        choices=("uint32", "auto"),
        default="uint32",
        help="tokens.npy element type: uint32 as the original, or auto, the smallest that "
        "holds the vocabulary (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-rows",
        type=int,
        default=DEFAULT_BATCH_ROWS,
        help="rows read and encoded per batch (default: %(default)s)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar and no summary; errors are still printed (default: off)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help=f"list every file in the summary, not only the first {MAX_LISTED} (default: off)",
    )
    parser.set_defaults(run=_run, scale_request=scale_request)


def scale_request(args: argparse.Namespace) -> dict:
    """What ``--executor`` plans: ``tokenize_options``'s dict (``data_io.tokenize.scaled``)."""
    return tokenize_options(
        args.inputs,
        args.output,
        tokenizer_path=args.tokenizer_path,
        boq=args.boq,
        eoq=args.eoq,
        eoa=args.eoa,
        conditions=parse_conditions(args.conditions),
        on_error=args.on_error,
        threads=None,
        token_dtype=args.token_dtype,
        progress=False,
        batch_rows=args.batch_rows,
    )


def _run(args: argparse.Namespace) -> int:
    started_ns = file_system_now(Path(args.output))
    try:
        result = _tokenize(args)
    except KeyboardInterrupt as stop:
        # The core stops within a batch and returns no report: say here what the stop left.
        said = interrupted_message(Path(args.output), started_ns)
        print(said, file=sys.stderr, flush=True)
        raise ReportedInterrupt.after(said, stop) from None
    if not args.quiet:
        # Failures and the MIXED block are said once, by the error raised below.
        print_summary(result, problems=False, verbose=args.verbose)
    result.raise_for_failures()
    return 0


def _tokenize(args: argparse.Namespace) -> TokenizeResult:
    return tokenize(
        args.inputs,
        args.output,
        tokenizer_path=args.tokenizer_path,
        boq=args.boq,
        eoq=args.eoq,
        eoa=args.eoa,
        conditions=parse_conditions(args.conditions),
        on_error=args.on_error,
        threads=args.threads,
        token_dtype=args.token_dtype,
        progress=False if args.quiet else None,
        batch_rows=args.batch_rows,
        check=False,
    )


def interrupted_message(output: Path, started_ns: int) -> str:
    """What a run stopped by Ctrl-C leaves in ``output``: the task folders whose record it
    wrote (each put in place whole, or a record brought up to date) are complete and kept;
    the others are as they were."""
    written = _records_written_since(output, started_ns)
    return (
        f"data_io tokenize: stopped by Ctrl-C; {counted(written, 'task folder')} written or "
        f"brought up to date by this run {'is' if written == 1 else 'are'} complete and kept in "
        f"{output}, every other task folder is as it was (a folder is renamed into place only "
        "once finished). Run the same command again to finish: it redoes only what is left"
    )


def file_system_now(output: Path) -> int:
    """The time, in ns, as the file system holding ``output`` stamps files (a temporary file's
    mtime), for ``_records_written_since`` to compare the records' mtimes with: on a network
    file system the server stamps them, and this machine's clock may be off by seconds. 0 when
    ``output`` does not exist yet (every record in it will be this run's); this machine's clock
    where no file can be made there (the run then fails on it itself)."""
    if not output.is_dir():
        return 0
    try:
        with tempfile.NamedTemporaryFile(dir=output, prefix=".data_io_clock-") as probe:
            return os.fstat(probe.fileno()).st_mtime_ns
    except OSError:
        return time.time_ns()


def _records_written_since(output: Path, started_ns: int) -> int:
    """Task folders of ``output`` whose metadata.json is newer than ``started_ns``: a record is
    written last, into the finished folder, so a newer one marks a task this run completed."""
    if not output.is_dir():
        return 0
    written = 0
    for folder in output.iterdir():
        record = folder / "metadata.json"
        if folder.name.startswith(".") or not record.is_file():
            continue
        if record.stat().st_mtime_ns >= started_ns:
            written += 1
    return written
