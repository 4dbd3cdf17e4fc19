"""The load stage: torch datasets and loaders over what the earlier stages wrote.

Today: ``SampledDataset`` over a sampled folder (formats.md §4/§5, the HRM-Text trainer's
batches), with ``ResumableDataLoader`` for exact resume; ``MemoryMappedDataset`` over a folder of
flat token shards (formats.md §6). torch is imported only inside this package.
"""

from data_io.load.layouts import IGNORE_INDEX, SCALAR_KEYS
from data_io.load.sampled import ResumableDataLoader, SampledDataset, format_batch, split_scalars
from data_io.load.shards import MemoryMappedDataset

__all__ = [
    "IGNORE_INDEX",
    "SCALAR_KEYS",
    "MemoryMappedDataset",
    "ResumableDataLoader",
    "SampledDataset",
    "format_batch",
    "split_scalars",
]
