"""Stage 2: train a byte-level BPE (or unigram) tokenizer on cleaned rows (formats.md §2).

Training runs in the Rust core with the GIL released; this module reads
``prefix_config.yaml`` (per-file text limits), calls it, and provides the
``data_io train-tokenizer`` sub-command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from data_io.errors import ConfigError
from data_io.fs import write_json_atomic
from data_io.rows_cli import ROW_FILES, add_rows_and_output

DEFAULT_VOCAB_SIZE = 65536
DEFAULT_TRUNCATE_LEN = 10_000
DEFAULT_LIMIT_MUL_FACTOR = 10
DEFAULT_PREFIX_CONFIG = "prefix_config.yaml"
MIN_FREQUENCY = 2


@dataclass(frozen=True)
class TrainFileResult:
    task: str
    rows: int
    texts_available: int
    texts_used: int
    bad_rows: int
    # Whether limit_mul_factor x max_per_file cut this file's texts (bad rows do not count).
    limited: bool


@dataclass(frozen=True)
class TrainResult:
    output: str
    vocab_size: int
    texts_used: int
    seconds: float
    files: list[TrainFileResult]
    # Files under the inputs that are not rows (by name), not read.
    skipped_files: list[str] = field(default_factory=list)
    # The vocabulary asked for (None when read back from an older report).
    requested_vocab_size: int | None = None
    # Roles (pad/bos/eos) that tokenizer_config.json names no token for.
    missing_roles: list[str] = field(default_factory=list)

    @property
    def limited(self) -> list[TrainFileResult]:
        """The files whose texts max_per_file limited."""
        return [f for f in self.files if f.limited]

    @classmethod
    def from_json(cls, text: str) -> TrainResult:
        raw = json.loads(text)
        raw["files"] = [TrainFileResult(**f) for f in raw["files"]]
        return cls(**raw)


def default_special_tokens() -> list[str]:
    from data_io import _core

    return list(_core.DEFAULT_SPECIAL_TOKENS)


def train_tokenizer(
    inputs: Sequence[str | Path],
    output: str | Path,
    *,
    tokenizer_type: str = "bpe",
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    seed: int = 0,
    prefix_config: str | Path | None = DEFAULT_PREFIX_CONFIG,
    truncate_len: int = DEFAULT_TRUNCATE_LEN,
    limit_mul_factor: int = DEFAULT_LIMIT_MUL_FACTOR,
    special_tokens: Sequence[str] | None = None,
    on_error: str = "fail",
    threads: int | None = None,
    progress: bool | None = None,
    pad_token: str | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
) -> TrainResult:
    """Train on the instruction and response texts of every row under ``inputs``.

    Writes ``output`` (a tokenizers JSON), and ``config.json`` and ``tokenizer_config.json``
    beside it, so that ``transformers.AutoTokenizer`` loads the folder and agrees with
    ``data_io tokenize``. ``prefix_config=None`` uses every text. Inputs without any row file,
    or without a single usable text, raise and write nothing. ``pad_token``/``bos_token``/
    ``eos_token`` name the special tokens ``tokenizer_config.json`` gives those roles (default:
    the pipeline's own tokens, when they are among ``special_tokens``).
    """
    if tokenizer_type not in ("bpe", "unigram"):
        raise ConfigError(f"tokenizer type must be 'bpe' or 'unigram', not {tokenizer_type!r}")
    for name, value in (("truncate_len", truncate_len), ("limit_mul_factor", limit_mul_factor)):
        if value < 1:
            raise ConfigError(f"{name} must be at least 1, not {value}")
    if seed < 0:
        raise ConfigError(f"seed must be non-negative, not {seed}")
    output = Path(output)
    if output.suffix != ".json":
        raise ConfigError(f"output {output} must be a .json file (e.g. OUT/tokenizer.json)")
    specials = list(default_special_tokens() if special_tokens is None else special_tokens)
    roles = {"pad_token": pad_token, "bos_token": bos_token, "eos_token": eos_token}
    chosen = {role: token for role, token in roles.items() if token is not None}
    for role, token in chosen.items():
        if token not in specials:
            flag = "--" + role.replace("_", "-")
            raise ConfigError(
                f"{flag} {token!r} is not one of the special tokens ({', '.join(specials[:8])}"
                f"{', …' if len(specials) > 8 else ''}); add it to --special-tokens"
            )
    from data_io import _core

    report = _core.train_tokenizer(
        [str(p) for p in inputs],
        str(output),
        kind=tokenizer_type,
        vocab_size=vocab_size,
        seed=seed,
        prefix_limits=_prefix_limits(prefix_config),
        truncate_len=truncate_len,
        limit_mul_factor=limit_mul_factor,
        special_tokens=specials,
        min_frequency=MIN_FREQUENCY,
        on_error=on_error,
        threads=threads,
        progress=sys.stderr.isatty() if progress is None else progress,
    )
    missing = _set_roles(output.parent / "tokenizer_config.json", chosen)
    return dataclasses.replace(
        TrainResult.from_json(report), requested_vocab_size=vocab_size, missing_roles=missing
    )


def _set_roles(path: Path, chosen: dict[str, str]) -> list[str]:
    """Give ``tokenizer_config.json`` the chosen role tokens; the roles it still lacks."""
    config = json.loads(path.read_text(encoding="utf-8"))
    if chosen:
        config.update(chosen)
        write_json_atomic(path, config)
    return [role for role in ("pad_token", "bos_token", "eos_token") if role not in config]


def _prefix_limits(prefix_config: str | Path | None) -> list[tuple[str, int | None]]:
    if prefix_config is None:
        return []
    from data_io.prefix_config import load_prefix_config

    return [(rule.prefix, rule.max_per_file) for rule in load_prefix_config(prefix_config).rules]


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
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bar and no summary; errors are still printed (default: off)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    prefix_config = None if args.prefix_config.lower() == "none" else args.prefix_config
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
    return 0


def caveats(result: TrainResult) -> list[str]:
    """What the user asked for and did not get, each on a line of its own."""
    lines = []
    asked = result.requested_vocab_size
    if asked is not None and result.vocab_size < asked:
        lines.append(
            f"note: the vocabulary has {result.vocab_size:,} tokens, not the {asked:,} asked: "
            f"the texts hold no more pairs seen at least {MIN_FREQUENCY} times; train on more "
            "texts (--prefix-config none uses every text) or ask for fewer with --vocab-size"
        )
    if result.missing_roles:
        flags = ", ".join("--" + role.replace("_", "-") for role in result.missing_roles)
        lines.append(
            f"note: tokenizer_config.json names no {', '.join(result.missing_roles)} (the "
            f"pipeline's tokens are not among --special-tokens); set them with {flags} TOKEN"
        )
    return lines


def summary_line(result: TrainResult) -> str:
    """One line: what was written, from how many texts and files."""
    bad = sum(f.bad_rows for f in result.files)
    return (
        f"train-tokenizer -> {result.output} (+ config.json, tokenizer_config.json): "
        f"vocab {result.vocab_size:,}, {result.texts_used:,} texts from {len(result.files)} "
        f"file(s) ({len(result.limited)} limited by max_per_file), {bad} bad row(s) skipped, "
        f"{result.seconds:.1f} s"
    )
