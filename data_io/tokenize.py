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

from data_io.errors import ConfigError, DataIoError, InputError, OutputError, TokenizerError
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

_ERROR_CLASSES: dict[str, type[DataIoError]] = {
    "input": InputError,
    "config": ConfigError,
    "tokenizer": TokenizerError,
    "output": OutputError,
}


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
    left_alone: list[str] = field(default_factory=list)

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

    def raise_for_failures(self) -> None:
        """Raise the error of the failed files (all of them in one message), if any."""
        failed = self.failed
        if not failed:
            return
        lines = "\n".join(f"  - {f.error}" for f in failed)
        error_class = _ERROR_CLASSES.get(failed[0].error_kind or "input", InputError)
        error = error_class(
            f"{len(failed)} of {len(self.files)} file(s) failed; the other outputs are intact "
            f"and a re-run redoes only what is missing:\n{lines}"
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
) -> TokenizeResult:
    """Tokenize every ``.jsonl``/``.parquet`` file under ``inputs`` into ``output``.

    Incremental: files whose content, tokenizer and options are unchanged are kept; folders
    of deleted sources are removed (only those data_io wrote). With ``check`` (default), a
    failed file raises after the others are done; the result is attached as ``.result``.
    ``progress=None`` shows a bar when stderr is a terminal.
    """
    if on_error not in ("fail", "skip"):
        raise ConfigError(f"on_error must be 'fail' or 'skip', not {on_error!r}")
    if token_dtype not in ("uint32", "auto"):
        raise ConfigError(f"token_dtype must be 'uint32' or 'auto', not {token_dtype!r}")
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be at least 1, not {threads}")
    if batch_rows < 1:
        raise ConfigError(f"batch_rows must be at least 1, not {batch_rows}")
    from data_io import _core

    mapping = DEFAULT_CONDITIONS if conditions is None else dict(conditions)
    report = _core.tokenize(
        [str(p) for p in inputs],
        str(output),
        str(resolve_tokenizer(tokenizer_path)),
        boq=boq,
        eoq=eoq,
        eoa=eoa,
        conditions=list(mapping.items()),
        on_error=on_error,
        threads=threads,
        token_dtype=token_dtype,
        progress=sys.stderr.isatty() if progress is None else progress,
        batch_rows=batch_rows,
    )
    result = TokenizeResult.from_json(report)
    if check:
        result.raise_for_failures()
    return result


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenize",
        help="tokenize cleaned rows into per-file token arrays (incremental)",
        description="Tokenize every .jsonl/.parquet file under DIR... into OUT/<task>/*.npy.",
    )
    parser.add_argument("inputs", nargs="+", metavar="DIR", help="folders of cleaned rows")
    parser.add_argument("-o", "--output", required=True, metavar="OUT")
    parser.add_argument(
        "--tokenizer-path",
        default=DEFAULT_TOKENIZER,
        help="tokenizer.json, a folder holding one, or a Hub id (default: %(default)s)",
    )
    parser.add_argument("--boq", default=DEFAULT_BOQ, help="begin-of-question token")
    parser.add_argument("--eoq", default=DEFAULT_EOQ, help="end-of-question token")
    parser.add_argument("--eoa", default=DEFAULT_EOA, help="end-of-answer token")
    parser.add_argument(
        "--conditions",
        default=",".join(f"{k}={v}" for k, v in DEFAULT_CONDITIONS.items()),
        help="condition tag to token map, TAG=TOKEN,... (default: %(default)s)",
    )
    parser.add_argument("--on-error", choices=("fail", "skip"), default="fail")
    parser.add_argument("--threads", type=int, default=None, help="default: every core")
    parser.add_argument("--token-dtype", choices=("uint32", "auto"), default="uint32")
    parser.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS)
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from data_io.tokenize_summary import print_summary

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
        print_summary(result)
    result.raise_for_failures()
    return 0
