"""data_io: data preparation for LLM pretraining.

Stages (one module each): ``cleaning`` (raw datasets -> rows), ``train_tokenizer``,
``tokenize`` (rows -> per-file token arrays), ``sampling`` (token arrays -> per-epoch
index arrays), ``loader`` (torch ``Dataset`` over the sampled output).

Importing the package is cheap: the Rust extension and heavy dependencies are loaded by
the stage modules that need them.
"""

from data_io.errors import ConfigError, DataIoError, InputError, OutputError, TokenizerError

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DataIoError",
    "InputError",
    "OutputError",
    "TokenizerError",
    "__version__",
]
