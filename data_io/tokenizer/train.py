"""Stage 2: train a byte-level BPE (or unigram) tokenizer on cleaned rows (formats.md §2).

Training runs in the Rust core with the GIL released; this module reads
``prefix_config.yaml`` (per-file text limits) and calls it. Its command line is
``tokenizer/cli.py`` (``data_io train-tokenizer``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import resource
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError
from data_io.formats.prefix_config import load_prefix_config
from data_io.formats.raw_text import ReadOptions
from data_io.util.threads import checked_threads
from data_io.util.words import counted

DEFAULT_VOCAB_SIZE = 65536
DEFAULT_TRUNCATE_LEN = 10_000
DEFAULT_LIMIT_MUL_FACTOR = 10
DEFAULT_PREFIX_CONFIG = "prefix_config.yaml"
MIN_FREQUENCY = 2
# "rust": data_io's BPE trainer (rust/train/words.rs, merge.rs); "hf": tokenizers' trainers.
TRAINERS = ("rust", "hf")


@dataclass(frozen=True)
class TrainFileResult:
    task: str
    rows: int
    texts_available: int
    texts_used: int
    bad_rows: int
    # Whether limit_mul_factor x max_per_file cut this file's texts (bad rows do not count).
    limited: bool
    # UTF-8 bytes of the texts used (0 when read back from an older report).
    text_bytes: int = 0


@dataclass(frozen=True)
class SpillResult:
    """What the counting pass did with its memory budget."""

    peak_table_bytes: int
    runs: int
    run_bytes: int
    spill_dir: str | None


@dataclass(frozen=True)
class CountingResult:
    """The Rust trainer's two passes: the distinct words counted and the time each pass took."""

    words: int
    pieces: int
    # UTF-8 bytes of the texts used, and of those counted in this run (not read back).
    text_bytes: int
    counted_bytes: int
    count_seconds: float
    merge_seconds: float
    count_memory: int
    spill: SpillResult
    # Files whose counts were read back (--counts, scale-out units) instead of counted.
    reused_files: list[str]
    counts_dir: str | None

    @classmethod
    def from_dict(cls, raw: dict) -> CountingResult:
        return cls(**{**raw, "spill": SpillResult(**raw["spill"])})


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
    # The Rust trainer's passes (None for tokenizers' trainers).
    counting: CountingResult | None = None
    # The process's peak resident memory (bytes; None when read back from an older report).
    peak_rss: int | None = None
    # "bpe" or "unigram" (None when read back from an older report).
    tokenizer_type: str | None = None
    # Raw text (--text-field): lines whose invalid UTF-8 was replaced with U+FFFD.
    invalid_utf8_lines: int = 0
    # The field raw text was read by (--text-field; None: rows).
    text_field: str | None = None

    @property
    def limited(self) -> list[TrainFileResult]:
        """The files whose texts max_per_file limited."""
        return [f for f in self.files if f.limited]

    @classmethod
    def from_json(cls, text: str) -> TrainResult:
        raw = json.loads(text)
        raw["files"] = [TrainFileResult(**f) for f in raw["files"]]
        if raw.get("counting"):
            raw["counting"] = CountingResult.from_dict(raw["counting"])
        return cls(**raw)


def default_special_tokens() -> list[str]:
    from data_io import _core  # noqa: PLC0415  CLI start-up: the Rust extension loads when work starts

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
    trainer: str | None = None,
    count_memory: int | None = None,
    counts_dir: str | Path | None = None,
    count_parts: Sequence[str | Path] = (),
    text_field: str | None = None,
    doc_per_line: bool = False,
) -> TrainResult:
    """Train on the instruction and response texts of every row under ``inputs``.

    Writes ``output`` (a tokenizers JSON), and ``config.json`` and ``tokenizer_config.json``
    beside it, so that ``transformers.AutoTokenizer`` loads the folder and agrees with
    ``data_io tokenize``. ``prefix_config=None`` uses every text. Inputs without any row file,
    or without a single usable text, raise and write nothing. ``pad_token``/``bos_token``/
    ``eos_token`` name the special tokens ``tokenizer_config.json`` gives those roles (default:
    the pipeline's own tokens, when they are among ``special_tokens``). ``trainer``: ``"rust"``
    (the default: data_io's counting pass, then its BPE merges, equal to ``tokenizers``', or
    its unigram EM passes, ``tokenizers``' pieces and the same file on any thread count) or
    ``"hf"`` (``tokenizers``' own trainers fed the texts: BPE's file the same, unigram's
    pieces the same, their scores within 1e-9).

    The Rust trainer counts in at most ``count_memory`` bytes of tables (default: a quarter of
    the machine's memory), spilling sorted runs beside ``output`` past it; ``counts_dir`` keeps
    each file's counts there, so a re-run counts only new or changed files; ``count_parts`` are
    folders of counts made by scale-out units (``data_io.tokenizer.scaled``).

    ``text_field`` trains on raw text instead of rows: every document of the ``.txt``, JSONL,
    Parquet (compressed or not) files or ``datasets`` sources under ``inputs``, read as
    ``prepare`` reads them (JSONL, Parquet and datasets rows by their ``text_field``; text files
    cut at blank lines, or one document per line with ``doc_per_line``); ``prefix_config`` does
    not apply (every document is used).
    """
    # Every keyword argument, by name: the checks and the Rust core's options read them here.
    settings = {k: v for k, v in locals().items() if k not in ("inputs", "output")}
    check_text_options(settings)
    if text_field is not None:
        return _train_on_text(inputs, Path(output), settings)
    options = core_options(inputs, output, settings)
    from data_io import _core  # noqa: PLC0415  CLI start-up: the Rust extension loads when work starts

    trainer = options.pop("trainer")
    report = _core.train_tokenizer(json.dumps(options), trainer=trainer)
    missing = _missing_roles(Path(output).parent / "tokenizer_config.json")
    return dataclasses.replace(
        TrainResult.from_json(report),
        requested_vocab_size=vocab_size,
        missing_roles=missing,
        peak_rss=peak_rss(),
        tokenizer_type=tokenizer_type,
    )


def check_text_options(settings: dict[str, Any]) -> None:
    """The raw-text options (``text_field``, ``doc_per_line``) against the others, before any
    reading: the CLI asks this before it reads the held-out texts."""
    if settings.get("text_field") is None:
        if settings.get("doc_per_line"):
            raise ConfigError(
                "--doc-per-line cuts the .txt files of raw text into documents; it needs "
                "--text-field FIELD (rows are read by their instruction and response)"
            )
        return
    if settings.get("counts_dir") is not None or settings.get("count_parts"):
        raise ConfigError("--counts and scale-out counting read rows; drop --text-field")
    if settings.get("trainer") not in (None, "rust"):
        raise ConfigError("raw text (--text-field) is counted by the rust trainer; drop --trainer")
    if settings.get("on_error", "fail") != "fail":
        raise ConfigError(
            "--on-error skip skips bad rows of cleaned rows; raw text (--text-field) is read as "
            "`data_io prepare` reads it, where a bad document (a row whose field is not a "
            "string) fails the run naming its file and line: fix or remove it, or drop "
            "--on-error skip"
        )


def _train_on_text(inputs: Sequence[str | Path], output: Path, settings: dict) -> TrainResult:
    """``train_tokenizer(text_field=...)``: the raw text counted by ``text_counts``, then the
    merge pass over those counts."""
    from data_io.tokenizer.text_counts import count_text_sources, scratch_folder  # noqa: PLC0415  only raw-text runs read raw text

    # The merge pass reads the counts alone: no rows, no per-file limits.
    merge = {**settings, "text_field": None, "doc_per_line": False, "prefix_config": None}
    core_options([], output, {**merge, "count_parts": ["-"]})  # checked before reading
    folder = scratch_folder(output)
    try:
        counted = count_text_sources(
            inputs,
            folder,
            read=ReadOptions(
                text_field=settings["text_field"], doc_per_line=settings["doc_per_line"]
            ),
            truncate_len=settings["truncate_len"],
            count_memory=settings["count_memory"],
            threads=settings["threads"],
            progress=settings["progress"],
        )
        result = train_tokenizer([], output, **{**merge, "count_parts": [folder]})
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    counting = result.counting
    if counting is not None:
        # Counted here, not read back: the summary reports the reading and counting pass.
        counting = dataclasses.replace(
            counting,
            counted_bytes=counting.text_bytes,
            reused_files=[],
            count_seconds=counted.seconds + counting.count_seconds,
        )
    # What the reading repaired or found empty is said, as prepare says it of the same files.
    empty = [f"{name} (no documents)" for name in counted.empty_sources]
    return dataclasses.replace(
        result,
        counting=counting,
        skipped_files=[*counted.skipped_files, *empty],
        invalid_utf8_lines=counted.invalid_utf8_lines,
        text_field=settings["text_field"],
        seconds=counted.seconds + result.seconds,
    )


def core_options(inputs: Sequence[str | Path], output: str | Path, settings: dict) -> dict:
    """``train_tokenizer``'s keyword arguments ``settings`` (any left out take its defaults)
    checked, as the options the Rust core takes (with ``trainer``; ``roles``: the special tokens
    chosen for ``tokenizer_config.json``'s roles, written with it)."""
    unknown = sorted(set(settings) - set(_DEFAULTS))
    if unknown:
        raise ConfigError(f"train_tokenizer has no option {', '.join(unknown)}")
    given = {**_DEFAULTS, **settings}
    tokenizer_type, trainer = given["tokenizer_type"], given["trainer"]
    if tokenizer_type not in ("bpe", "unigram"):
        raise ConfigError(f"tokenizer type must be 'bpe' or 'unigram', not {tokenizer_type!r}")
    if trainer is None:
        trainer = "rust"
    if trainer not in TRAINERS:
        raise ConfigError(f"trainer must be one of {', '.join(TRAINERS)}, not {trainer!r}")
    counting = (given["counts_dir"], given["count_parts"], given["count_memory"])
    if trainer == "hf" and (counting[0] is not None or counting[1] or counting[2] is not None):
        raise ConfigError(
            "--counts, --count-memory and scale-out counting belong to the rust trainer; "
            "drop them or use --trainer rust"
        )
    for name in ("truncate_len", "limit_mul_factor", "vocab_size"):
        if given[name] < 1:
            raise ConfigError(f"{name} must be at least 1, not {given[name]}")
    checked_threads(given["threads"])
    if given["seed"] < 0:
        raise ConfigError(f"seed must be non-negative, not {given['seed']}")
    if given["count_memory"] is not None and given["count_memory"] < 1:
        raise ConfigError(f"count_memory must be at least one byte, not {given['count_memory']}")
    for name, (most, why) in _MOST.items():
        if given[name] is not None and given[name] > most:
            raise ConfigError(f"{name} must be at most {most:,} ({why}), not {given[name]:,}")
    output = Path(output)
    if output.suffix != ".json":
        raise ConfigError(f"output {output} must be a .json file (e.g. OUT/tokenizer.json)")
    _no_file_in_the_way(output.parent, f"the output {output}")
    _no_folder_in_the_way(output)
    if given["counts_dir"] is not None:
        _no_file_in_the_way(Path(given["counts_dir"]), f"--counts {given['counts_dir']}")
    specials = given["special_tokens"]
    specials = list(default_special_tokens() if specials is None else specials)
    _check_special_tokens(specials)
    _check_vocab_size(given["vocab_size"], len(specials), tokenizer_type)
    chosen = {role: given[role] for role in _ROLES if given[role] is not None}
    for role, token in chosen.items():
        if token not in specials:
            flag = "--" + role.replace("_", "-")
            raise ConfigError(
                f"{flag} {token!r} is not one of the special tokens ({', '.join(specials[:8])}"
                f"{', …' if len(specials) > 8 else ''}); add it to --special-tokens"
            )
    progress = given["progress"]
    options = {
        "inputs": [str(p) for p in inputs],
        "output": str(output),
        "kind": tokenizer_type,
        "vocab_size": given["vocab_size"],
        "seed": given["seed"],
        "prefix_limits": _prefix_limits(given["prefix_config"]),
        "truncate_len": given["truncate_len"],
        "limit_mul_factor": given["limit_mul_factor"],
        "special_tokens": specials,
        "roles": chosen,
        "min_frequency": MIN_FREQUENCY,
        "on_error": given["on_error"],
        "threads": given["threads"],
        "progress": sys.stderr.isatty() if progress is None else progress,
        "count_memory": given["count_memory"],
        "counts_dir": None if given["counts_dir"] is None else str(given["counts_dir"]),
        "count_parts": [str(p) for p in given["count_parts"]],
        "trainer": trainer,
    }
    return options


def peak_rss() -> int:
    """This process's peak resident memory, in bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


_ROLES = ("pad_token", "bos_token", "eos_token")
# The largest value of the options the Rust core holds in fixed-size integers, and why.
_MOST = {
    "vocab_size": (2**32 - 1, "token ids are 32-bit"),
    "truncate_len": (2**64 - 1, "a 64-bit count of characters"),
    "limit_mul_factor": (2**64 - 1, "a 64-bit factor"),
    "seed": (2**64 - 1, "a 64-bit seed"),
    "count_memory": (2**64 - 1, "a 64-bit count of bytes"),
}


def _check_special_tokens(specials: list[str]) -> None:
    """Refuse a special token given twice, and one the model cannot keep apart from its base
    tokens: an empty one, or one of the 256 ByteLevel symbols every byte-level vocabulary
    starts with (it would take that byte's place, and encoders would disagree on its id)."""
    from data_io.tokenizer.vocabularies import byte_level_alphabet  # noqa: PLC0415  CLI start-up: only when training

    alphabet = set(byte_level_alphabet())
    seen = set()
    for token in specials:
        if token in seen:
            raise ConfigError(
                f"--special-tokens {token!r} is given twice; a special token has one id: drop "
                "the second"
            )
        seen.add(token)
        if token == "":
            raise ConfigError(
                "--special-tokens holds an empty token; a special token is a non-empty string: "
                "drop it (quote it only when it has spaces)"
            )
        if token in alphabet:
            raise ConfigError(
                f"--special-tokens {token!r} is one of the 256 byte-level symbols every "
                "vocabulary starts with (a byte's own token): as a special token it would take "
                f"that byte's place; choose a longer token (e.g. <|{token}|>)"
            )


def _check_vocab_size(vocab_size: int, specials: int, tokenizer_type: str) -> None:
    """Refuse a vocabulary smaller than its fixed tokens: the 256 byte tokens and the special
    tokens. A unigram one needs a piece more: ``tokenizers``' unigram trainer, asked for exactly
    those, never stops adding pieces (its cut-off compares for equality after the 256 bytes
    are in) and writes every piece it learned, more tokens than asked."""
    least = 256 + specials + (1 if tokenizer_type == "unigram" else 0)
    if vocab_size < least:
        piece = " and at least one learned piece" if tokenizer_type == "unigram" else ""
        raise ConfigError(
            f"--vocab-size {vocab_size:,} is too small: a byte-level {tokenizer_type} vocabulary "
            f"holds the 256 byte tokens, {counted(specials, 'special token')}{piece}; ask for at "
            f"least {least:,} (or fewer --special-tokens)"
        )


def _no_file_in_the_way(folder: Path, what: str) -> None:
    """Refuse a ``folder`` to write into that is, or lies under, a regular file."""
    for path in (folder, *folder.parents):
        if path.exists():
            if not path.is_dir():
                where = "is" if path == folder else f"lies under {path}, which is"
                raise ConfigError(
                    f"{what}: {folder} {where} a file, not a folder; choose a path under a "
                    "folder (or move the file away)"
                )
            return


# What a run writes: the tokenizer, then these two beside it.
_WRITTEN_BESIDE = ("config.json", "tokenizer_config.json")
# Another tokenizer's files that transformers.AutoTokenizer reads beside tokenizer.json (added
# tokens, other eos/pad, a chat template) or in its place (use_fast=False): left in the output
# folder they would make it load as neither tokenizer.
_OTHER_TOKENIZER_FILES = (
    "added_tokens.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
)


def _no_folder_in_the_way(output: Path) -> None:
    """Refuse, before training, a folder where a file is to be written (the rename into place
    would fail after the training, leaving its temporary beside it and, for the two files
    written after the tokenizer, a tokenizer.json without them), and another tokenizer's files
    in the output folder. Our own three files are rewritten: a re-run is not refused."""
    for path in (output, *(output.parent / name for name in _WRITTEN_BESIDE)):
        if path.is_dir():
            raise ConfigError(
                f"the output {output}: {path} is a folder, where train-tokenizer writes a file; "
                "move it away or choose another output folder"
            )
    other = [name for name in _OTHER_TOKENIZER_FILES if (output.parent / name).exists()]
    if other:
        raise ConfigError(
            f"the output folder {output.parent} holds another tokenizer's {', '.join(other)}, "
            "which transformers.AutoTokenizer would load beside the new tokenizer.json (other "
            "special tokens, added tokens): remove them or choose an empty folder"
        )


# train_tokenizer's keyword arguments and their defaults (what core_options fills in).
_DEFAULTS = {
    name: parameter.default
    for name, parameter in inspect.signature(train_tokenizer).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
}


def _missing_roles(path: Path) -> list[str]:
    """The roles the written ``tokenizer_config.json`` names no token for."""
    config = json.loads(path.read_text(encoding="utf-8"))
    return [role for role in _ROLES if role not in config]


def _prefix_limits(prefix_config: str | Path | None) -> list[tuple[str, int | None]]:
    if prefix_config is None:
        return []

    return [(rule.prefix, rule.max_per_file) for rule in load_prefix_config(prefix_config).rules]
