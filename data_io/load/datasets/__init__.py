"""One torch ``Dataset`` family per module (each a ``protocols.MapSource``):

* ``sampled``: ``SampledDataset`` over a sampled folder (the HRM-Text trainer's packed batches);
* ``shards``: ``MemoryMappedDataset``, windows of flat token shards (formats.md §6);
* ``hf_text``: ``HuggingFaceDataset`` / ``StreamingHuggingFaceDataset``, text through the encoder;
* ``row_sources``: ``RowSource``, where tokenized rows are (local, remote, Hub) and their reading;
* ``row_checks``: ``check_rows``, every row of a source validated (ids, labels, lengths);
* ``tokenized_rows`` / ``rows_stream``: xorl's tokenized rows, packed, eager or streamed;
* ``mixture``: ``MixtureDataset``, several sources by weight.
"""
