"""MyPT's ``python scripts/prepare_dataset.py --input_files … --out_dir …``, run by ``data_io prepare``.

Every command line of MyPT's large-dataset guide runs unchanged: its flags (``--input_files``,
``--out_dir``, ``--tokenization``, ``--tokens_per_shard``, ``--val_fraction``, ``--no_normalize``,
``--no_filter``, ``--no_dedup``) are spellings of ``data_io prepare``'s, and using them writes
MyPT's layout (uint32 ``.bin`` shards numbered across ``train/`` then ``val/``,
``tokenizer_state.json``, MyPT's ``dataset_metadata.json`` keys beside data_io's). The other
flags of ``data_io prepare`` work too (``--help`` lists them all). docs/compat/mypt.md says what
differs from MyPT's own script and why.
"""

import sys

from data_io.cli import main

if __name__ == "__main__":
    sys.exit(main(["prepare", *sys.argv[1:]]))
