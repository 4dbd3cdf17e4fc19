"""Stage 3: cleaned rows -> per-file token arrays (formats.md §3).

The work runs in the Rust core (``data_io._core.tokenize``) with the GIL released; this module
is the typed API over it and the ``data_io tokenize`` sub-command.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from data_io.errors import ConfigError, InputError, OutputError, error_class
from data_io.rows_cli import ROW_FILES, add_rows_and_output
from data_io.tokenizer_files import resolve_tokenizer

DEFAULT_TOKENIZER = "trained_tokenizers/bpe/tokenizer.json"
DEFAULT_BOQ = "<|im_start|>"
DEFAULT_EOQ = "<|im_end|>"
DEFAULT_EOA = "<|box_end|>"
DEFAULT_CONDITIONS: dict[str, str] = {
    "direct": "<|object_ref_start|>",
    "cot": "<|object_ref_end|>",
    "noisy": "<|quad_start|>",
    "synth": "<|quad_end|>",
}
DEFAULT_BATCH_ROWS = 4096
# How many tasks or files a message lists by name; the rest are counted.
MAX_LISTED = 15


@dataclass(frozen=True)
class FileResult:
    """What happened to one source file."""

    task: str
    source: str
    status: str  # "tokenized", "unchanged" or "failed"
    reason: str
    rows: int
    tokens: int
    bad_rows: int
    bad_row_examples: list[str]
    warnings: list[str]
    bytes: int
    seconds: float
    error: str | None
    error_kind: str | None


@dataclass(frozen=True)
class TokenizeResult:
    """The report of one ``tokenize`` run."""

    output: str
    tokenizer_path: str
    vocab_size: int
    token_dtype: str
    threads: int
    seconds: float
    files: list[FileResult]
    removed_orphans: list[str] = field(default_factory=list)
    # Task folders not produced by this run that stay, "name (reason)": only a folder whose
    # recorded source file is gone is removed.
    kept: list[str] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)
    # The run's input roots (absolute) and the files under them that are not rows.
    inputs: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    # Task folders tokenized with another tokenizer or options than tokenizer_info.json says,
    # "name (why)", and the command that repairs the folder (None when nothing is mixed).
    mixed: list[str] = field(default_factory=list)
    repair_command: str | None = None
    # What the output folder holds after the run, over every task folder (kept ones too).
    output_tasks: int = 0
    output_rows: int = 0
    output_tokens: int = 0
    # The engine that encoded: "fast-bpe" (exact, served by the fast encoder) or
    # "hf-tokenizers", with the reason the fast one does not serve this tokenizer.
    encoder: str = ""
    encoder_fallback: str | None = None

    @classmethod
    def from_json(cls, text: str) -> TokenizeResult:
        raw = json.loads(text)
        raw["files"] = [FileResult(**f) for f in raw["files"]]
        return cls(**raw)

    def with_status(self, status: str) -> list[FileResult]:
        return [f for f in self.files if f.status == status]

    @property
    def failed(self) -> list[FileResult]:
        return self.with_status("failed")

    @property
    def mixed_warning(self) -> str | None:
        """What is mixed in the output folder and how to repair it, or None."""
        if not self.mixed:
            return None
        listed = "\n".join(f"  - {task}" for task in self.mixed[:MAX_LISTED])
        more = (
            f"\n  ... and {len(self.mixed) - MAX_LISTED} more"
            if len(self.mixed) > MAX_LISTED
            else ""
        )
        return (
            f"the output {self.output} is MIXED: {len(self.mixed)} task folder(s) do not match "
            f"its tokenizer_info.json (tokenizer {self.tokenizer_path}); a model trained on it "
            f"sees two tokenizations:\n{listed}{more}\n"
            f"Repair it (fix the failed files first, if any) with:\n  {self.repair_command}"
        )

    def raise_for_failures(self) -> None:
        """Raise if any file failed or the output is MIXED (everything in one message), or if
        the output holds no row at all.

        The class is that of the first failed file's error; a MIXED output without failed
        files raises OutputError: the folder is unfit for training until repaired.
        """
        failed = self.failed
        if not failed and not self.mixed:
            self._raise_if_no_rows()
            return
        parts = []
        if failed:
            lines = "\n".join(f"  - {f.error}" for f in failed)
            parts.append(
                f"{len(failed)} of {len(self.files)} file(s) failed; the other outputs are "
                f"intact and a re-run redoes only what is missing:\n{lines}"
            )
        if self.mixed_warning:
            parts.append(self.mixed_warning)
        raised = error_class(failed[0].error_kind) if failed else OutputError
        error = raised("\n".join(parts))
        error.result = self  # type: ignore[attr-defined]
        raise error

    def _raise_if_no_rows(self) -> None:
        # Every file empty or all its rows bad (under --on-error skip): the tasks are valid
        # but hold nothing to train on. Fine only if the folder has other tasks.
        if self.kept or any(f.rows for f in self.files):
            return
        bad = sum(f.bad_rows for f in self.files)
        why = f"all {bad:,} row(s) were bad and skipped" if bad else "every file is empty"
        error = InputError(
            f"no rows at all: {len(self.files)} input file(s) under {', '.join(self.inputs)} "
            f"and {why}; the output {self.output} holds no training data. Check the inputs "
            f"(run with --on-error fail to see the first bad row)"
        )
        error.result = self  # type: ignore[attr-defined]
        raise error


def parse_conditions(text: str) -> dict[str, str]:
    """``direct=<|a|>,cot=<|b|>`` -> {"direct": "<|a|>", "cot": "<|b|>"}; "" -> {}."""
    mapping: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        tag, sep, token = item.partition("=")
        if not sep or not tag or not token:
            raise ConfigError(
                f"--conditions item {item!r} is not TAG=TOKEN (e.g. direct=<|object_ref_start|>)"
            )
        if tag in mapping:
            raise ConfigError(f"--conditions gives tag {tag!r} twice")
        mapping[tag] = token
    return mapping


def tokenize(
    inputs: Sequence[str | Path],
    output: str | Path,
    *,
    tokenizer_path: str | Path = DEFAULT_TOKENIZER,
    boq: str = DEFAULT_BOQ,
    eoq: str = DEFAULT_EOQ,
    eoa: str = DEFAULT_EOA,
    conditions: Mapping[str, str] | None = None,
    on_error: str = "fail",
    threads: int | None = None,
    token_dtype: str = "uint32",
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    check: bool = True,
    parts: str | Path | None = None,
) -> TokenizeResult:
    """Tokenize every ``.jsonl`` (also ``.jsonl.gz``, ``.jsonl.zst``; any case) and
    ``.parquet`` file under ``inputs`` into ``output``.

    Incremental: files whose content, tokenizer and options are unchanged are kept; a task
    folder not produced by this run is removed only if data_io wrote it and its recorded
    source file is gone (others are kept and listed in ``kept``). With ``check`` (default), a
    failed file, a MIXED output (see ``mixed``) or no row at all raises after all the work is
    done; the result is attached as ``.result``. ``progress=None`` shows a bar when stderr is a terminal.
    ``parts``: a folder where ``data_io.scale`` units left encoded parts of files; a file whose
    parts are all there and current is assembled from them instead of encoded.
    """
    from data_io import _core

    if parts is None:
        # Parts a scaled-out run left (finished units of an unfinished run) are used too.
        left = Path(output) / ".data_io_scale" / "parts"
        parts = left if left.is_dir() else None
    options = tokenize_options(
        inputs,
        output,
        tokenizer_path=tokenizer_path,
        boq=boq,
        eoq=eoq,
        eoa=eoa,
        conditions=conditions,
        on_error=on_error,
        threads=threads,
        token_dtype=token_dtype,
        progress=progress,
        batch_rows=batch_rows,
        parts=parts,
    )
    result = TokenizeResult.from_json(_core.tokenize(json.dumps(options)))
    if check:
        result.raise_for_failures()
    return result


def tokenize_options(
    inputs: Sequence[str | Path],
    output: str | Path,
    *,
    tokenizer_path: str | Path = DEFAULT_TOKENIZER,
    boq: str = DEFAULT_BOQ,
    eoq: str = DEFAULT_EOQ,
    eoa: str = DEFAULT_EOA,
    conditions: Mapping[str, str] | None = None,
    on_error: str = "fail",
    threads: int | None = None,
    token_dtype: str = "uint32",
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    parts: str | Path | None = None,
) -> dict:
    """The options of ``tokenize`` checked and made plain (JSON-ready, the tokenizer resolved
    to its file): what the Rust core takes, and what a ``scale`` manifest records."""
    if on_error not in ("fail", "skip"):
        raise ConfigError(f"on_error must be 'fail' or 'skip', not {on_error!r}")
    if token_dtype not in ("uint32", "auto"):
        raise ConfigError(f"token_dtype must be 'uint32' or 'auto', not {token_dtype!r}")
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be at least 1, not {threads}")
    if batch_rows < 1:
        raise ConfigError(f"batch_rows must be at least 1, not {batch_rows}")
    mapping = DEFAULT_CONDITIONS if conditions is None else dict(conditions)
    return {
        "inputs": [str(p) for p in inputs],
        "output": str(output),
        "tokenizer_path": str(resolve_tokenizer(tokenizer_path)),
        "boq": boq,
        "eoq": eoq,
        "eoa": eoa,
        "conditions": [list(item) for item in mapping.items()],
        "on_error": on_error,
        "threads": threads,
        "token_dtype": token_dtype,
        "progress": sys.stderr.isatty() if progress is None else progress,
        "batch_rows": batch_rows,
        "parts": None if parts is None else str(parts),
    }


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
    from data_io.scale.cli import add_executor_arguments

    add_executor_arguments(parser)
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from data_io.tokenize_summary import print_summary

    if args.executor is not None:
        from data_io.scale.cli import run_scaled

        return run_scaled(
            args,
            tokenize_options(
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
            ),
        )
    result = tokenize(
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
    if not args.quiet:
        # Failures and the MIXED block are said once, by the error raised below.
        print_summary(result, problems=False, verbose=args.verbose)
    result.raise_for_failures()
    return 0
