"""Command-line arguments shared by the stages that read cleaned rows (train-tokenizer, tokenize)."""

from __future__ import annotations

import argparse
import re
from typing import Any

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


_SIZE_UNITS = {"": 2**20, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def memory_size(text: str) -> int:
    """Bytes in ``text``: a number with an optional binary unit, ``512M``, ``8G``, ``1.5GiB``; a
    plain number is MiB. For argparse's ``type=``: a bad value is an ``ArgumentTypeError``."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*", text.upper())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a memory size: give a number with K, M, G or T (e.g. 512M, 8G)"
        )
    size = int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])
    if size < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a memory size must be at least one byte")
    return size


def positive_int(text: str) -> int:
    """An integer of at least 1, for argparse's ``type=`` (0 is not taken for "the default")."""
    return _checked_number(text, int, "an integer", lambda value: value >= 1, "at least 1")


def non_negative_int(text: str) -> int:
    """An integer of at least 0, for argparse's ``type=`` (a count where 0 means none)."""
    return _checked_number(text, int, "an integer", lambda value: value >= 0, "0 or more")


def positive_number(text: str) -> float:
    """A number above 0, for argparse's ``type=``."""
    return _checked_number(text, float, "a number", lambda value: value > 0, "above 0")


def _checked_number(text: str, convert: Any, kind: str, ok: Any, rule: str) -> Any:
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"must be {rule}, got {text}")
    return value
