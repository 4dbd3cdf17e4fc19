"""Stage 3, tokenize: cleaned rows -> per-file token arrays (formats.md §3), incrementally.

* ``api``: ``tokenize`` and ``tokenize_options`` (its options checked, as a plan records them);
* ``options``: ``TokenizeOptions`` (what the Rust core takes, declared once), the defaults;
* ``result``: ``FileResult`` and ``TokenizeResult`` (the report, and its one error);
* ``summary``: the table the command prints; ``cli``: ``data_io tokenize``;
* ``scaled``: the stage as units of a scale-out plan (``data_io.stage.Stage``).
"""

from data_io.tokenize.api import parse_conditions, tokenize, tokenize_options
from data_io.tokenize.options import (
    DEFAULT_BATCH_ROWS,
    DEFAULT_BOQ,
    DEFAULT_CONDITIONS,
    DEFAULT_EOA,
    DEFAULT_EOQ,
    DEFAULT_TOKENIZER,
    TokenizeOptions,
)
from data_io.tokenize.result import FileResult, TokenizeResult

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_BOQ",
    "DEFAULT_CONDITIONS",
    "DEFAULT_EOA",
    "DEFAULT_EOQ",
    "DEFAULT_TOKENIZER",
    "FileResult",
    "TokenizeOptions",
    "TokenizeResult",
    "parse_conditions",
    "tokenize",
    "tokenize_options",
]
