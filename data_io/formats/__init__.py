"""On-disk formats read by more than one package (formats.md), as ground that knows no stage.

- ``task_arrays``: the tokenizer's per-task ``.npy`` arrays (names, dtypes, ``tokens.npy`` header).
- ``dtypes``: a dtype named in a metadata file, read without trusting the file.
"""
