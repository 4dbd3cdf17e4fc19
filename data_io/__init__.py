"""data_io: data preparation for LLM pretraining.

Stages (one module each): ``cleaning`` (raw datasets -> rows), ``train_tokenizer``,
``tokenize`` (rows -> per-file token arrays), ``sampling`` (token arrays -> per-epoch
index arrays), ``loader`` (torch ``Dataset`` over the sampled output).

Importing the package is cheap: the Rust extension and heavy dependencies are loaded by
the stage modules that need them.
"""

from data_io.errors import ConfigError, DataIoError, InputError, OutputError, TokenizerError

# pyproject.toml's [project] version, used when the package is run from a checkout that was
# never installed (no distribution metadata to read).
_SOURCE_VERSION = "0.1.0"


def __getattr__(name: str) -> str:
    # ``__version__`` is looked up on first use: importlib.metadata costs ~60 ms to import,
    # and importing the package must stay cheap.
    if name != "__version__":
        raise AttributeError(f"module 'data_io' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415  ~60 ms, on first use

    try:
        found = version("data_io")
    except PackageNotFoundError:
        found = _SOURCE_VERSION
    globals()["__version__"] = found
    return found


__all__ = [
    "ConfigError",
    "DataIoError",
    "InputError",
    "OutputError",
    "TokenizerError",
    "__version__",
]
