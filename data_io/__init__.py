"""data_io: data preparation for LLM pretraining.

Stages, one package each, in pipeline order: ``cleaning`` (raw datasets -> rows), ``tokenizer``
(its files, the encoder, and training one), ``tokenize`` (rows -> per-file token arrays),
``sampling`` (token arrays -> per-epoch index arrays), ``prepare`` (raw text -> flat shards) and
``load`` (torch datasets and loaders over all of them). Beneath them: ``stage`` (the protocol the
``scale`` layer runs stages through), ``formats`` (on-disk readers), ``util`` and ``errors``. On
top: ``cli`` (the ``data_io`` command, the one place that composes stages and scale-out),
``inspect`` and ``example``. ``loader``, ``encoder``, ``vocabularies`` and ``train_tokenizer``
are compatibility imports. docs/architecture.md draws the house and its rules.

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
