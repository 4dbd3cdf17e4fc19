"""``data_io inspect PATH``: its options, and the exit status (1 when a problem was found)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from data_io.inspect.api import inspect_path
from data_io.inspect.summary import print_report
from data_io.util.args import non_negative_int


# -- command line -------------------------------------------------------------------------------
def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="validate a shard, tokenized, sampled or rows folder; counts, dtype, documents",
        description="Validate PATH (a `data_io prepare` output, a flat shard folder, a "
        "tokenized folder, a sampled folder, a packing cache, or cleaned rows: a .jsonl, "
        ".jsonl.gz or .parquet file or a folder of them), print what it holds and show a few "
        "documents, decoded with their special tokens. Exits 1 when a problem is found.",
    )
    parser.add_argument("path", metavar="PATH", help="the folder or rows file to inspect")
    parser.add_argument(
        "--documents",
        type=non_negative_int,
        default=3,
        help="documents to decode, 0 for none (default: %(default)s)",
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="skip the SHA-256 check of prepare's shards (default: off: checked)",
    )
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="tokenizer to decode with, when the folder has none (default: the folder's, if any)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the report as JSON (default: off: as text)"
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    report = inspect_path(
        args.path, documents=args.documents, verify=not args.no_verify, tokenizer=args.tokenizer
    )
    if args.json:
        shown = {**asdict(report), "ok": report.ok, "problem_count": report.problem_count}
        print(json.dumps(shown, indent=1, ensure_ascii=False))
    else:
        print_report(report)
    return 0 if report.ok else 1
