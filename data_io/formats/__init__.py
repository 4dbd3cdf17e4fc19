"""Ground that knows no stage: readers of what data_io writes and reads on disk (formats.md),
shared by more than one package. No torch here (``make lint`` checks it).

* ``dtypes``: a dtype named in a metadata file, read without trusting the file;
* ``task_arrays``: a tokenized task folder's ``.npy`` arrays (names, dtypes, ``tokens.npy`` header);
* ``provenance``: ``tokenizer_info.json`` and the task records: which run made which folder (§3);
* ``prefix_config``: ``prefix_config.yaml``, the per-prefix sampling rules (§4);
* ``sampled``: a sampled folder (``metadata.json``, the pool, the epochs) (§4/§5);
* ``shards``: flat shard folders' metadata (dtype, EOS, vocabulary, hashes) (§6);
* ``text_sources``: where a text dataset is (file, saved dataset, folder, Hub id);
* ``raw_text``: raw-text inputs (text, JSONL, Parquet, compressed, datasets) to documents, for
  ``prepare`` and ``train-tokenizer --text-field``.
"""
