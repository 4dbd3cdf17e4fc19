"""``data_io inspect PATH``: validate a data folder, count what it holds, decode a few documents.

Understood folders (told apart by their marker file):

* a ``data_io prepare`` shard folder (``dataset_metadata.json`` written by prepare): every
  listed shard exists with the recorded size and SHA-256, no unlisted or temporary shard lies
  around, no run is half done, every id is below the vocabulary, and the EOS count of each split
  equals its recorded document count;
* its ``train/`` or ``val/``: as a flat shard folder, noting that the prepare folder's own
  check is the whole one; an empty split prepare recorded as empty is no problem;
* any other flat shard folder (``*.npy``, or ``*.bin`` with a declared dtype, formats.md §6):
  token counts and dtype, as ``MemoryMappedDataset`` sees them;
* a tokenized folder (``tokenizer_info.json``, formats.md §3): per task, `data_io sample`'s own
  checks (dtypes, shapes, the row layout, the tokenizer's record of rows and tokens);
* a sampled folder (``metadata.json`` with ``tokenizer_info``, formats.md §4): the pool and every
  epoch's row table, checked by the loader's own reader;
* a packing cache (``data_io pack`` / ``TokenizedRowsDataset``'s ``dataset_prepared_path``, or
  one plan folder of it): what each bin plan covers; it holds no tokens;
* cleaned rows (formats.md §1): a ``.jsonl`` / ``.jsonl.gz`` / ``.parquet`` file, or a folder
  of them: rows and columns per file, every row checked, a few rows shown; files whose rows hold
  a ``text`` field and none of the cleaned fields are prepare's raw text rows, checked as such;
* a run that has not finished (prepare's journal, or a scaled-out plan not yet finalized) and an
  empty folder: said as such, with how to go on.

Decoded rows show their special tokens (BOQ, the condition tags, EOQ, EOA): the layout is part
of what is inspected. Problems are collected, printed, and make the command exit 1; notes are
printed but are no problem.

Modules: ``api`` (which kind a path is), one module a kind (``prepared``, ``flat``,
``tokenized``, ``sampled``, ``plans``, ``rows``), ``report`` (the result and shared helpers),
``summary`` (printing it), ``cli`` (the command).
"""

from data_io.inspect.api import inspect_path
from data_io.inspect.cli import register
from data_io.inspect.report import InspectReport

__all__ = ["InspectReport", "inspect_path", "register"]
