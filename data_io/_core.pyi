"""Type stubs of the private Rust extension. Use the typed facade instead:
``data_io.tokenize.tokenize`` and ``data_io.train_tokenizer.train_tokenizer``."""

from collections.abc import Sequence
from os import PathLike

DEFAULT_SPECIAL_TOKENS: list[str]
SPLIT_REGEX: str

def tokenize(
    inputs: Sequence[str | PathLike[str]],
    output: str | PathLike[str],
    tokenizer_path: str | PathLike[str],
    *,
    boq: str,
    eoq: str,
    eoa: str,
    conditions: Sequence[tuple[str, str]],
    on_error: str,
    threads: int | None,
    token_dtype: str,
    progress: bool,
    batch_rows: int,
) -> str:
    """Tokenize every .jsonl/.parquet file under ``inputs``; returns the run report as JSON."""

def train_tokenizer(
    inputs: Sequence[str | PathLike[str]],
    output: str | PathLike[str],
    *,
    kind: str,
    vocab_size: int,
    seed: int,
    prefix_limits: Sequence[tuple[str, int | None]],
    truncate_len: int,
    limit_mul_factor: int,
    special_tokens: Sequence[str],
    min_frequency: int,
    on_error: str,
    threads: int | None,
    progress: bool,
) -> str:
    """Train a tokenizer and write it (and config.json beside it); returns the report as JSON."""
