"""Command-line arguments shared by the stages that read cleaned rows (train-tokenizer, tokenize)."""

from __future__ import annotations

import argparse

# What both stages read, matched case-insensitively; every other visible file is listed as skipped.
ROW_FILES = ".jsonl, .jsonl.gz, .jsonl.zst or .parquet file (any case)"


def add_rows_and_output(parser: argparse.ArgumentParser, *, metavar: str, output_help: str) -> None:
    """The input folders (positional) and the required ``-o/--output``."""
    parser.add_argument(
        "inputs", nargs="+", metavar="DIR", help="folders (or files) of cleaned rows"
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar=metavar, help=f"{output_help} (required)"
    )
