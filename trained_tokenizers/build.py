"""Rebuild ``trained_tokenizers/bpe/`` offline: a 65,536-token byte-level BPE trained by
``data_io train-tokenizer`` on the Python 3.11 documentation (Debian's python3.11-doc, turned
into rows by benchmarks/corpus.py) plus the embedded example rows.

    python trained_tokenizers/build.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(
    0, str(ROOT)
)  # benchmarks/ as a package: its tokenize.py must not shadow the stdlib's

from benchmarks import corpus  # noqa: E402
from data_io.tokenizer.train import train_tokenizer  # noqa: E402

WORK = ROOT / "work" / "tokenizer_corpus"


def main() -> None:
    rows = corpus.docs_rows(corpus.docs_sources())
    corpus.write_jsonl(WORK / "python_docs.jsonl", rows)
    result = train_tokenizer(
        [WORK, ROOT / "data_io" / "example_data" / "rows"],
        ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json",
        vocab_size=65536,
        prefix_config=None,
    )
    print(f"vocab {result.vocab_size:,} from {result.texts_used:,} texts in {result.seconds:.1f} s")


if __name__ == "__main__":
    main()
