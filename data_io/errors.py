"""The exception hierarchy of data_io.

The Rust core maps its single error type onto these classes (in ``rust/bindings.rs``), and
the Python stages raise the same ones, so callers catch one family whatever stage failed.
Every message says what went wrong, where (file, line or row, config key) and how to fix it.
"""


class DataIoError(Exception):
    """Base class of every error data_io raises on purpose."""


class InputError(DataIoError, ValueError):
    """Bad input data: malformed JSON, a missing or non-string field, invalid UTF-8,
    an unreadable Parquet file, an unknown condition tag, an empty file."""


class ConfigError(DataIoError, ValueError):
    """Bad options or configuration: unknown keys, wrong types, impossible values."""


class TokenizerError(DataIoError):
    """A tokenizer that cannot be loaded or lacks the special tokens the layout needs."""


class OutputError(DataIoError, OSError):
    """The output cannot be written: no space, a folder data_io did not write is in the way."""
