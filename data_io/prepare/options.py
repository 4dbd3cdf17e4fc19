"""What each of ``prepare``'s options may be (dtypes, layouts, integers, choices, MyPT's
shards), and how sources are read and cleaned (``read_and_clean_options``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from data_io.errors import ConfigError
from data_io.formats.raw_text import ReadOptions
from data_io.prepare.normalize import CleanOptions

DTYPES = ("auto", "uint8", "uint16", "uint32")
# data_io: shards numbered per split, the smallest dtype. mypt: MyPT's layout (its guide): uint32
# .bin shards numbered across the splits, tokenizer_state.json for gpt2 and char.
LAYOUTS = ("data_io", "mypt")


def check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def mypt_shards(dtype: str, format: str) -> tuple[str, str]:
    """MyPT's shards: raw ``.bin`` of ``uint32``, which its trainer memory-maps without reading
    any metadata (``np.memmap(path, dtype=np.uint32)``)."""
    if dtype not in ("auto", "uint32"):
        raise ConfigError(
            f"layout mypt writes uint32 shards (MyPT's trainer reads them as uint32), not "
            f"{dtype}; leave --dtype unset, or use --layout data_io for {dtype} shards"
        )
    if format != "bin":
        raise ConfigError(
            f"layout mypt writes raw .bin shards (MyPT's), not {format}; leave --format unset, "
            "or use --layout data_io"
        )
    return "uint32", "bin"


def read_and_clean_options(
    *,
    text_field: str = "text",
    doc_per_line: bool = False,
    invalid_utf8: str = "replace",
    split: str = "train",
    hf_config: str | None = None,
    normalize: bool = True,
    filter: bool = True,
    min_line_chars: int = 2,
    min_doc_chars: int = 20,
    **_: Any,
) -> tuple[ReadOptions, CleanOptions]:
    """How sources are read and cleaned, from ``prepare``'s keyword arguments (the others are
    ignored): shared by a run and by ``scale`` units that read one source each."""
    read = ReadOptions(text_field, bool(doc_per_line), invalid_utf8, split, hf_config)
    return read, CleanOptions(bool(normalize), bool(filter), min_line_chars, min_doc_chars)
