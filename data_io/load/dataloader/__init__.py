"""From indices to batches; knows the datasets only through ``data_io.load.protocols``:

* ``collate``: a batch of items (or a dataset's own ``get_batch``) as tensors;
* ``stateful``: ``StatefulLoader``, torch's DataLoader with exact and elastic resume.
"""
