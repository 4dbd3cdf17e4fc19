"""The exception hierarchy of data_io.

The Rust core maps its single error type onto these classes (in ``rust/bindings/call.rs``), and
the Python stages raise the same ones, so callers catch one family whatever stage failed.
Every message says what went wrong, where (file, line or row, config key) and how to fix it.
"""

import errno


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


# How to get past an operating-system error, by errno name: what a user can do about it.
_OS_ADVICE = {
    "ENOSPC": "free space on that file system, or write the output to another one",
    "EDQUOT": "the disk quota is used up: free space or write the output elsewhere",
    "EROFS": "that file system is read-only: write the output to a writable folder",
    "EACCES": "check the permissions of that path, or use another folder",
    "EPERM": "check the permissions of that path, or use another folder",
    "EMFILE": "too many open files: raise the limit (ulimit -n) or use fewer workers",
    "ENFILE": "the system ran out of file handles: close other programs or use fewer workers",
    "EIO": "the device reported an I/O error: check the disk (dmesg), then run again",
    "ENOENT": "the path does not exist (it may have been moved or deleted during the run)",
    "ENOTDIR": "a part of the path is a file, not a folder",
    "EISDIR": "the path is a folder where a file was expected",
    "ENAMETOOLONG": "the path is too long: use a shorter output folder",
    "ENOMEM": "the system ran out of memory: use fewer workers or threads",
}


def os_error_message(error: OSError) -> str:
    """One line for an operating-system error: what failed, on which path, and what to do.

    Every stage's command line prints this instead of a traceback (disk full, read-only file
    system, permissions...): the output written so far stays as the stage's own rules leave it.
    """
    name = errno.errorcode.get(error.errno or 0, "")
    what = error.strerror or str(error) or type(error).__name__
    paths = [p for p in (error.filename, error.filename2) if p is not None]
    where = " -> ".join(str(p) for p in paths)
    advice = _OS_ADVICE.get(name, "fix the cause and run again; finished outputs are kept")
    return f"{where + ': ' if where else ''}{what}{f' [{name}]' if name else ''}; {advice}"


# The kinds of error the Rust core reports (rust/error.rs, ErrorKind::name), each one class:
# the one map, used by the extension's exceptions and by reports that carry an error_kind.
_KINDS: dict[str, type[DataIoError]] = {
    "input": InputError,
    "config": ConfigError,
    "tokenizer": TokenizerError,
    "output": OutputError,
}


def error_class(kind: str | None) -> type[DataIoError]:
    """The exception class of an error kind of the Rust core; ``InputError`` when unknown."""
    return _KINDS.get(kind or "input", InputError)
