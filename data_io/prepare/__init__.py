"""``data_io prepare``: raw text and Hugging Face datasets → flat train/val token shards.

MyPT's ``prepare_dataset`` at scale (formats.md §6): stream the inputs, normalise, filter,
de-duplicate in bounded memory, tokenize with the project's Rust encoder, and write shards of
exactly ``tokens_per_shard`` tokens that ``data_io.load.MemoryMappedDataset`` reads with no
extra flags. One job per module:

* (its inputs are read by ``data_io.formats.raw_text``, shared with ``train-tokenizer``);
* ``normalize``: normalisation and filters, each counted;
* ``dedup``: exact de-duplication by 128-bit hash with a memory budget (sorted runs on disk);
* ``split``: the seeded, per-document train/val split;
* ``tokenizers``: tokenizer.json / Hub id / gpt2 / char behind one interface;
* ``shards``: the shard writer (temporary names, exact sizes, .bin or .npy);
* ``state``: dataset_metadata.json, the run journal and the rollback (incremental, crash-safe);
* ``pipeline``: the two passes; ``parts``: pass 1 of one source as a scale-out unit's part;
* ``options``: what each option may be (dtypes, layouts, MyPT's shards) and how sources are read
  and cleaned; ``run_plan``: ``plan_run``, the options checked and the new sources found before
  any work; ``run``: one run over the new sources, rolled back on failure;
  ``dataset_metadata``: the folder's metadata after a run; ``leftover_parts``: the parts an
  unfinished scaled run left, and its plan settled by a plain run;
* ``api``: ``prepare(...)``; ``result``: ``PrepareResult``; ``summary``: what the command prints;
* ``cli``: the sub-command; ``scaled``: the stage as units of a scale-out plan.

``data_io inspect`` (every stage's folders) is ``data_io.inspect``.
"""

from data_io.prepare.api import prepare
from data_io.prepare.result import PrepareResult

__all__ = ["PrepareResult", "prepare"]
