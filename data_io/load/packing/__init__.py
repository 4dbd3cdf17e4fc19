"""Packing documents into fixed-length rows; numpy only (no torch):

* ``layouts``: the batch keys and label masking the loaders share (``IGNORE_INDEX``);
* ``multipack``: the sampled folder's packed prefix-LM rows;
* ``row_bins``: bin plans of tokenized rows (sequential and multipack), cached on disk.
"""
